/*
 * The server's confinement of itself, entered once start-up is over: no new
 * privileges, a seccomp filter that lets through only the system calls
 * serving makes, and Landlock: under -r file access beneath the root (and
 * reads of what user and group lookups need), and wherever the kernel
 * offers it no TCP and no abstract unix socket or signal outside.
 */
#ifndef SANDBOX_H
#define SANDBOX_H

/*
 * Confines the process for the rest of its life.  root is the -r directory,
 * or NULL; uploads, whether -A names unnamed files (linkat(2)'s flags).
 * First loads what user and group lookups need (the name service's
 * modules) while loading is still allowed.  What the kernel lacks
 * is left out: this never fails and never stops the session.  Logs at
 * VERBOSE what is in force, and at ERROR when root is given and Landlock
 * cannot keep files beneath it.
 */
void	sandbox_enter(const char *root, int uploads);

/*
 * Logs at ERROR each system call that the filter trapped since the last
 * time, once per call over the session: one off its list (it failed with
 * ENOSYS), or one with arguments its row does not allow (EPERM).  Cheap
 * when there is none: the loop calls it before each wait.
 */
void	sandbox_report(void);

#endif /* SANDBOX_H */
