// Package report holds what the test clients in tests/go print alike: the
// milliseconds since start and a connect error's errno by name, in the
// "key=value" form the C test programs use (lib.ms_of reads "ms=N").
package report

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

var start = time.Now()

// MS is the whole milliseconds since the program started.
func MS() int64 { return time.Since(start).Milliseconds() }

var names = map[syscall.Errno]string{
	syscall.ECONNREFUSED:  "ECONNREFUSED",
	syscall.ETIMEDOUT:     "ETIMEDOUT",
	syscall.ENETUNREACH:   "ENETUNREACH",
	syscall.EHOSTUNREACH:  "EHOSTUNREACH",
	syscall.ECONNRESET:    "ECONNRESET",
	syscall.ECONNABORTED:  "ECONNABORTED",
	syscall.EADDRNOTAVAIL: "EADDRNOTAVAIL",
	syscall.EADDRINUSE:    "EADDRINUSE",
	syscall.EINPROGRESS:   "EINPROGRESS",
	syscall.EINTR:         "EINTR",
	syscall.EAGAIN:        "EAGAIN",
	syscall.EPERM:         "EPERM",
	syscall.EACCES:        "EACCES",
}

// Errno names the system error under err: "ECONNREFUSED", "E<n>" for one
// not in the table, "timeout" for a deadline that passed (net.Error's
// Timeout) with no errno, "none" otherwise.
func Errno(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		if n, ok := names[e]; ok {
			return n
		}
		return fmt.Sprintf("E%d", int(e))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "none"
}

// Usage prints a usage line to stderr and exits 2.
func Usage(line string) {
	fmt.Fprintln(os.Stderr, "usage: "+line)
	os.Exit(2)
}
