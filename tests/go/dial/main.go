// dial ADDR [TIMEOUT]: one TCP connect, net.Dial (or net.DialTimeout with a
// Go duration such as 2s or 500ms). Prints
//
//	connected ms=N local=HOST:PORT            (exit 0)
//	error errno=NAME ms=N msg=TEXT            (exit 1)
//
// ADDR is HOST:PORT with a literal address ("127.0.0.1:5000", "[::1]:5000"),
// so that no resolver is involved.
package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"backoffshim.test/go/internal/report"
)

func main() {
	if len(os.Args) != 2 && len(os.Args) != 3 {
		report.Usage("dial ADDR [TIMEOUT]")
	}
	addr := os.Args[1]
	var c net.Conn
	var err error
	if len(os.Args) == 3 {
		d, perr := time.ParseDuration(os.Args[2])
		if perr != nil || d <= 0 {
			report.Usage("dial ADDR [TIMEOUT]  (TIMEOUT: a Go duration, e.g. 2s)")
		}
		c, err = net.DialTimeout("tcp", addr, d)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		fmt.Printf("error errno=%s ms=%d msg=%v\n", report.Errno(err), report.MS(), err)
		os.Exit(1)
	}
	fmt.Printf("connected ms=%d local=%v\n", report.MS(), c.LocalAddr())
	c.Close()
}
