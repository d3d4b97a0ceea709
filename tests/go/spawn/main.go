// spawn CMD ARGS...: runs CMD as a child (os/exec: clone and execve),
// stdin, stdout and stderr inherited, and exits with its status: the
// child's exit code, or 128+N if a signal N killed it (as a shell does);
// 127 if CMD could not be started. Prints to stderr
//
//	spawn: pid=P exit=S ms=N
//
// so a test can tell the grandchild's output (stdout) from spawn's.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"backoffshim.test/go/internal/report"
)

func main() {
	if len(os.Args) < 2 {
		report.Usage("spawn CMD [ARGS...]")
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "spawn: cannot start %s: %v\n", os.Args[1], err)
		os.Exit(127)
	}
	err := cmd.Wait()
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			status = 128 + int(ws.Signal())
		} else {
			status = ws.ExitStatus()
		}
	} else if err != nil {
		fmt.Fprintf(os.Stderr, "spawn: %v\n", err)
		status = 127
	}
	fmt.Fprintf(os.Stderr, "spawn: pid=%d exit=%d ms=%d\n", cmd.Process.Pid, status, report.MS())
	os.Exit(status)
}
