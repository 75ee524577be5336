/*
 * The pipes sshd gives a session on stdin, stdout and stderr.  They are
 * counted against the user's pipe quota (pipe-user-pages-soft), which every
 * session of that user shares, so a session keeps them small while it is idle and
 * grows them only while traffic shows a transfer: fewer, larger reads and
 * writes then.  A grow the kernel refuses leaves the pipe as it was, which
 * is slower, never wrong; a busy pipe tries again a second later.
 */
#ifndef PIPES_H
#define PIPES_H

#include <stddef.h>

/* Notes which of stdin, stdout and stderr are pipes, and their sizes. */
void	pipes_init(void);
/* A read from stdin returned n bytes: grows stdin when it ran full. */
void	pipes_read(size_t n);
/* n bytes are about to be written to stdout: grows it when they fill it. */
void	pipes_write(size_t n);
/*
 * The session is idle: shrinks the pipes to one page.  Returns 0, or -1
 * when a pipe still holds data and must be shrunk later.
 */
int	pipes_idle(void);

#endif /* PIPES_H */
