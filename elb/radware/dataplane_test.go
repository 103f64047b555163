package radware

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/lbfed/lbfed/elb/radware/alteonsim"
	"github.com/lbfed/lbfed/lbcf/driver"
	"github.com/lbfed/lbfed/lbspec"
)

// lineServer answers every connection with its name and a newline, then echoes each line until
// the client closes (a long-lived connection whose exchanges can be checked one by one).
func lineServer(t *testing.T, name string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, name+"\n")
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// session is one client connection through the VIP.
type session struct {
	c  net.Conn
	r  *bufio.Reader
	to string // backend name it reached
}

func open(t *testing.T, addr string) *session {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	s := &session{c: c, r: bufio.NewReader(c)}
	name, err := s.r.ReadString('\n')
	if err != nil {
		t.Fatalf("no greeting through %s: %v", addr, err)
	}
	s.to = strings.TrimSpace(name)
	return s
}

// exchange sends a line and returns its echo ("" when the connection failed).
func (s *session) exchange(line string) string {
	if _, err := io.WriteString(s.c, line+"\n"); err != nil {
		return ""
	}
	got, err := s.r.ReadString('\n')
	if err != nil {
		return ""
	}
	return strings.TrimSpace(got)
}

// finish closes the client's side and reports whether the server side then closed cleanly.
func (s *session) finish() bool {
	defer s.c.Close()
	if err := s.c.(*net.TCPConn).CloseWrite(); err != nil {
		return false
	}
	rest, err := io.ReadAll(s.r)
	return err == nil && len(rest) == 0
}

// TestDrainOnTheDataPlane: while a deregistered backend drains (membership shutdown-connection),
// the device sends it no new connection and its open connections go on and finish normally; once
// the drain is over and it is removed, nothing reaches it. Nothing is dropped.
func TestDrainOnTheDataPlane(t *testing.T) {
	g := NewWithT(t)
	e := newTestEnv(t, envOptions{sim: alteonsim.Options{DataPlane: true, HealthCheckManual: true},
		frontend: FrontendOptions{DrainPeriod: 4 * time.Second}})
	l, err := net.Listen("tcp", "127.0.0.42:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	vip := net.JoinHostPort("127.0.0.42", strconv.Itoa(port))
	info := e.create(t, map[string]string{"vip": "127.0.0.42", "port": strconv.Itoa(port), "method": "rr"})
	id := info[lbspec.KeyVirtualServer]
	stay, leave := lineServer(t, "stay"), lineServer(t, "leave")
	for _, a := range []string{stay, leave} {
		g.Expect(e.backend(t, driver.EnsureBackend, info, a, nil).Status).To(Equal(driver.StatusSucc))
	}
	leaveRS := id + "_" + strings.Replace(leave, ":", "_", 1)

	// Two connections, one per member (round robin); the one on "leave" stays open.
	first, second := open(t, vip), open(t, vip)
	g.Expect([]string{first.to, second.to}).To(ConsistOf("stay", "leave"))
	held := first
	if second.to == "leave" {
		held = second
	}
	g.Expect(held.exchange("before")).To(Equal("before"))
	served := e.sim.A.Served()[leaveRS]
	g.Expect(served).To(Equal(1))

	rsp := e.backend(t, driver.DeregisterBackend, info, leave, nil)
	g.Expect(rsp.Status).To(Equal(driver.StatusRunning), rsp.Msg)
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).To(HaveKeyWithValue(leaveRS, 3), "shutdown-connection")

	// During the drain: every new connection goes to "stay"; the open one keeps working.
	for i := 0; i < 6; i++ {
		s := open(t, vip)
		g.Expect(s.to).To(Equal("stay"), "no new connection to a draining member")
		g.Expect(s.finish()).To(BeTrue())
	}
	g.Expect(held.exchange("during")).To(Equal("during"), "an open connection continues through the drain")
	g.Expect(held.finish()).To(BeTrue(), "and finishes normally")
	g.Expect(e.backend(t, driver.DeregisterBackend, info, leave, nil).Status).To(Equal(driver.StatusRunning),
		"the checks above ran while the member drained")
	g.Expect(e.sim.A.Served()[leaveRS]).To(Equal(served))

	// After the drain the member and its real server are gone, and nothing goes there.
	g.Eventually(func() string { return e.backend(t, driver.DeregisterBackend, info, leave, nil).Status }).
		WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Equal(driver.StatusSucc))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).Members(id)).NotTo(HaveKey(leaveRS))
	g.Expect(e.sim.A.Snapshot(alteonsim.Running).RealServers()).NotTo(ContainElement(leaveRS))
	for i := 0; i < 4; i++ {
		s := open(t, vip)
		g.Expect(s.to).To(Equal("stay"))
		g.Expect(s.finish()).To(BeTrue())
	}
	g.Expect(e.sim.A.Served()[leaveRS]).To(Equal(served))
	g.Expect(e.sim.A.Dropped()).To(BeEmpty(), "no connection was dropped")
}
