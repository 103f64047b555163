package deploy

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"
)

// serveTCPService listens on addr and forwards every connection to one of backends, as a
// Service with several ready pods does: round robin, skipping a backend that refuses the
// connection (a replica being restarted), so that no caller sees one replica's absence. It runs
// until the process exits.
func serveTCPService(addr string, backends []string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("service on %s: %w", addr, err)
	}
	var next atomic.Uint64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				start := int(next.Add(1))
				var b net.Conn
				for i := range backends {
					b, err = net.DialTimeout("tcp", backends[(start+i)%len(backends)], time.Second)
					if err == nil {
						break
					}
				}
				if b == nil {
					return
				}
				defer b.Close()
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if cw, ok := dst.(interface{ CloseWrite() error }); ok {
						_ = cw.CloseWrite()
					}
					done <- struct{}{}
				}
				go pipe(b, c)
				go pipe(c, b)
				<-done
				<-done
			}()
		}
	}()
	return nil
}
