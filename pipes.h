/*
 * The pipes sshd gives a session on stdin, stdout and stderr.  They are
 * counted against the user's pipe quota (pipe-user-pages-soft), which every
 * session of that user shares, so a session keeps them small while its
 * traffic is a trickle, whether requests come or not, and grows them only
 * while traffic shows a transfer: fewer, larger reads and writes then.  A
 * grow the kernel refuses leaves the pipe as it was, which is slower, never
 * wrong; a busy pipe tries again a second later.  stdout may be a unix
 * stream socket instead (sftp -D): its send buffer grows and shrinks the
 * same way, when its reader runs on another CPU.
 */
#ifndef PIPES_H
#define PIPES_H

#include <stddef.h>

/* Notes which of stdin, stdout and stderr are pipes, and their sizes. */
void	pipes_init(void);
/* A read from stdin returned n bytes: grows stdin when it ran full. */
void	pipes_read(size_t n);
/*
 * n bytes are about to be written to stdout: grows it when they fill it
 * (a socket: when, besides, its reader took bytes since the last large
 * write, while the session worked).
 */
void	pipes_write(size_t n);
/* The n bytes of the last pipes_write() are written. */
void	pipes_written(size_t n);
/*
 * The session is about to wait for input.  Returns how long it may wait,
 * in milliseconds (-1: no limit), or 0 when the traffic has fallen to a
 * trickle: the session should give back what a transfer grew, and call
 * pipes_idle().  It reads the clock at most once.
 */
int	pipes_wait(void);
/*
 * Whether the traffic has been a trickle since the pipes last shrank
 * (pipes_idle()): no window since has moved a transfer's bytes.
 */
int	pipes_quiet(void);
/*
 * Shrinks the pipes to one page.  A pipe that still holds data is tried
 * again when pipes_wait() next returns 0.
 */
void	pipes_idle(void);

#endif /* PIPES_H */
