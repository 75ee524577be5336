// gosftp: Go pkg/sftp's server over standard input and output, as an SSH
// subsystem runs it: a peer for the benchmarks of bench/. It serves the
// whole file system from the working directory, as OpenSSH's server does.
// With -R it is read-only.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/pkg/sftp"
)

func main() {
	readOnly := flag.Bool("R", false, "read-only")
	flag.Parse()
	var opts []sftp.ServerOption
	if *readOnly {
		opts = append(opts, sftp.ReadOnly())
	}
	rw := struct {
		io.Reader
		io.WriteCloser
	}{os.Stdin, os.Stdout}
	srv, err := sftp.NewServer(rw, opts...)
	if err == nil {
		err = srv.Serve()
	}
	if err != nil && err != io.EOF {
		fmt.Fprintln(os.Stderr, "gosftp:", err)
		os.Exit(1)
	}
}
