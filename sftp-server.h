/*
 * The server as a function, so that main() (sftp-server-main.c) and the
 * fuzz harness (tests/fuzz/fuzz_session.c) can both start a session.
 */
#ifndef SFTP_SERVER_H
#define SFTP_SERVER_H

/*
 * Runs one session on stdin and stdout with the options in argv, as
 * OpenSSH's sftp_server_main().  Returns only in the fuzz build; otherwise
 * the session ends the process.
 */
int	sftp_server_main(int argc, char **argv);

#endif /* SFTP_SERVER_H */
