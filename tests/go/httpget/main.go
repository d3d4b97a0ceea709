// httpget URL: one GET with net/http (no proxy from the environment, no
// keep-alive). Prints
//
//	status=CODE ms=N body=FIRST_LINE          (exit 0, whatever the code)
//	error errno=NAME ms=N msg=TEXT            (exit 1)
package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strings"

	"backoffshim.test/go/internal/report"
)

func main() {
	if len(os.Args) != 2 {
		report.Usage("httpget URL")
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	resp, err := client.Get(os.Args[1])
	if err != nil {
		fmt.Printf("error errno=%s ms=%d msg=%v\n", report.Errno(err), report.MS(), err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	fmt.Printf("status=%d ms=%d body=%s\n", resp.StatusCode, report.MS(), strings.TrimRight(line, "\r\n"))
}
