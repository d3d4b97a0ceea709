// goroutines N ADDR: N goroutines dial ADDR at once (net.Dial); every
// connection stays open until all dials are done, then all are closed.
// Prints one line
//
//	connected=K of=N ms=T [errno=NAME:COUNT ...]
//
// (the errors counted by name, sorted) and exits 0 if all N connected, 1 if
// not.
package main

import (
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"backoffshim.test/go/internal/report"
)

func main() {
	if len(os.Args) != 3 {
		report.Usage("goroutines N ADDR")
	}
	n, err := strconv.Atoi(os.Args[1])
	if err != nil || n < 1 {
		report.Usage("goroutines N ADDR  (N >= 1)")
	}
	addr := os.Args[2]
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
		errs  = map[string]int{}
	)
	begin := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			c, err := net.Dial("tcp", addr)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[report.Errno(err)]++
				return
			}
			conns = append(conns, c)
		}()
	}
	close(begin)
	wg.Wait()
	ms := report.MS()
	for _, c := range conns {
		c.Close()
	}
	var parts []string
	for name, count := range errs {
		parts = append(parts, fmt.Sprintf("errno=%s:%d", name, count))
	}
	sort.Strings(parts)
	line := fmt.Sprintf("connected=%d of=%d ms=%d", len(conns), n, ms)
	if len(parts) > 0 {
		line += " " + strings.Join(parts, " ")
	}
	fmt.Println(line)
	if len(conns) != n {
		os.Exit(1)
	}
}
