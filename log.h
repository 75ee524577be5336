/*
 * Logging as OpenSSH's sftp-server does it: syslog with a facility and the
 * program name as ident, or stderr with -e; levels QUIET to DEBUG3.  A line
 * below the level is never formatted.
 */
#ifndef LOG_H
#define LOG_H

enum log_level {
	LOG_LEVEL_QUIET = 0,
	LOG_LEVEL_FATAL,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_INFO,
	LOG_LEVEL_VERBOSE,
	LOG_LEVEL_DEBUG1,
	LOG_LEVEL_DEBUG2,
	LOG_LEVEL_DEBUG3,
	LOG_LEVEL_NOT_SET = -1,
};

/* The level in force; read by the macros below, set by log_init(). */
extern int log_level;

/* Returns the level named (case-insensitive), or LOG_LEVEL_NOT_SET. */
int	log_level_number(const char *);
/* Returns the syslog facility named (case-insensitive), or -1. */
int	log_facility_number(const char *);
/* Starts logging; on_stderr selects stderr over syslog. */
void	log_init(const char *ident, int level, int facility, int on_stderr);
/* Formats and writes one line at the given level. */
void	log_emit(int level, const char *fmt, ...)
	    __attribute__((format(printf, 2, 3)));

#define log_at(lvl, ...) do {					\
	if ((lvl) <= log_level)					\
		log_emit((lvl), __VA_ARGS__);			\
} while (0)
#define logit(...)	log_at(LOG_LEVEL_INFO, __VA_ARGS__)
#define verbose(...)	log_at(LOG_LEVEL_VERBOSE, __VA_ARGS__)
#define error(...)	log_at(LOG_LEVEL_ERROR, __VA_ARGS__)
#define debug(...)	log_at(LOG_LEVEL_DEBUG1, __VA_ARGS__)
#define debug2(...)	log_at(LOG_LEVEL_DEBUG2, __VA_ARGS__)
#define debug3(...)	log_at(LOG_LEVEL_DEBUG3, __VA_ARGS__)

/*
 * OPENSSH_FN("process_read") "read \"%s\": %s": a line that OpenSSH's server
 * prefixes with the name of the function that writes it.  The prefix is kept
 * word for word, so that log scrapers written for OpenSSH's server keep
 * matching, whether or not this tree has a function of that name.
 */
#define OPENSSH_FN(name)	name ": "

#endif /* LOG_H */
