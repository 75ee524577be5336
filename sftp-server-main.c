/*
 * main(), apart from the server itself (sftp-server.c), as OpenSSH's
 * sftp-server-main.c: the fuzz harness links the server without it.
 */
#include "sftp-server.h"

int
main(int argc, char **argv)
{
	return sftp_server_main(argc, argv);
}
