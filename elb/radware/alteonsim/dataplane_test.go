package alteonsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// backend is a TCP (and UDP) server answering every connection with its name.
type backend struct {
	name string
	addr string // host:port
	l    net.Listener
	pc   net.PacketConn
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, addr: l.Addr().String(), l: l}
	// UDP on the same port number when it is free (best effort; UDP tests check it).
	if pc, err := net.ListenPacket("udp", b.addr); err == nil {
		b.pc = pc
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo([]byte(name+":"+string(buf[:n])), from)
			}
		}()
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.WriteString(c, name)
				// Hold the connection until the client closes it (for least-connections tests).
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		if b.pc != nil {
			_ = b.pc.Close()
		}
	})
	return b
}

// freePort finds a port that is free on ip for both TCP and UDP.
func freePort(t *testing.T, ip string) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", ip+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		pc, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", ip, port))
		_ = l.Close()
		if err == nil {
			_ = pc.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// hit opens one connection to addr and returns the backend name it reached ("" if refused).
func hit(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(c, buf, 1)
	return string(buf[:n])
}

func seedBackends(t *testing.T, c *client, vip string, port int, bs ...*backend) {
	m := map[string]string{}
	for _, b := range bs {
		m[b.name] = b.addr
	}
	seedService(c, vip, port, m)
}

func TestDataPlaneForwardsRoundRobin(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{DataPlane: true})
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	vip := "127.0.0.21"
	port := freePort(t, vip)
	addr := net.JoinHostPort(vip, strconv.Itoa(port))
	seedBackends(t, c, vip, port, b1, b2)
	g.Expect(hit(addr)).To(BeEmpty(), "nothing listens before apply")
	g.Expect(c.apply()).To(Equal("4"))
	g.Expect(d.Listening()).To(Equal([]string{"tcp " + addr}))
	g.Expect(c.rows("/SlbCurCfgEnhVirtServicesTable/v1/1")[0]["Status"]).To(BeEquivalentTo("1"), "up")

	counts := map[string]int{}
	for i := 0; i < 10; i++ {
		counts[hit(addr)]++
	}
	g.Expect(counts).To(Equal(map[string]int{"b1": 5, "b2": 5}))

	// Weights: b1 three times as likely.
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/b1", `{"Weight":3}`)
	c.apply()
	counts = map[string]int{}
	for i := 0; i < 8; i++ {
		counts[hit(addr)]++
	}
	g.Expect(counts).To(Equal(map[string]int{"b1": 6, "b2": 2}))
	g.Expect(d.Served()).To(HaveKeyWithValue("b1", 11))

	// Draining (shutdown-connection) and disabled members get no new connections.
	c.ok("PUT", "/SlbNewCfgEnhGroupRealServerTable/g1/b1", `{"State":3}`)
	c.apply()
	for i := 0; i < 4; i++ {
		g.Expect(hit(addr)).To(Equal("b2"))
	}
	c.ok("PUT", "/SlbNewCfgEnhGroupRealServerTable/g1/b1", `{"State":1}`)
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/b2", `{"State":3}`)
	c.apply()
	for i := 0; i < 4; i++ {
		g.Expect(hit(addr)).To(Equal("b1"))
	}

	// Disabling the virtual server stops the listener.
	c.ok("PUT", "/SlbNewCfgEnhVirtServerTable/v1", `{"VirtServerState":3}`)
	c.apply()
	g.Expect(d.Listening()).To(BeEmpty())
	g.Expect(hit(addr)).To(BeEmpty())
}

func TestDataPlaneMetrics(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{DataPlane: true})
	b1, b2, b3 := startBackend(t, "b1"), startBackend(t, "b2"), startBackend(t, "b3")
	vip := "127.0.0.22"
	port := freePort(t, vip)
	addr := net.JoinHostPort(vip, strconv.Itoa(port))
	seedBackends(t, c, vip, port, b1, b2, b3)

	// hash: one client address always reaches the same member.
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g1", `{"Metric":4}`)
	c.apply()
	first := hit(addr)
	g.Expect(first).NotTo(BeEmpty())
	for i := 0; i < 5; i++ {
		g.Expect(hit(addr)).To(Equal(first))
	}

	// leastConnections: with connections held open, new ones go to the idle members.
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g1", `{"Metric":2}`)
	c.apply()
	var held []net.Conn
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		conn, err := net.Dial("tcp", addr)
		g.Expect(err).NotTo(HaveOccurred())
		held = append(held, conn)
		buf := make([]byte, 8)
		n, _ := io.ReadAtLeast(conn, buf, 2)
		seen[string(buf[:n])] = true
	}
	g.Expect(seen).To(HaveLen(3), "three concurrent connections spread over three members")
	for _, h := range held {
		_ = h.Close()
	}
}

func TestDataPlaneUDP(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{DataPlane: true})
	b1 := startBackend(t, "u1")
	if b1.pc == nil {
		t.Skip("UDP port of the backend is taken")
	}
	vip := "127.0.0.23"
	port := freePort(t, vip)
	seedBackends(t, c, vip, port, b1)
	c.ok("PUT", "/SlbNewCfgEnhVirtServicesTable/v1/1", `{"UDPBalance":2}`)
	c.apply()
	conn, err := net.Dial("udp", net.JoinHostPort(vip, strconv.Itoa(port)))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	_, _ = conn.Write([]byte("ping"))
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("u1:ping"))
}

// TestDataPlaneHealthCheck: as on the device, a real server of a group with HealthID tcp is failed
// after FailRetry consecutive failed checks (not before: until then the metric still chooses it and
// its turns fail), gets no new connections while failed, shows failed in the runtime tables, and is
// restored after SuccRetry consecutive successful checks. Each server uses its own columns.
func TestDataPlaneHealthCheck(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{DataPlane: true, HealthCheckManual: true})
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	vip := "127.0.0.24"
	port := freePort(t, vip)
	addr := net.JoinHostPort(vip, strconv.Itoa(port))
	seedBackends(t, c, vip, port, b1, b2)
	rs := c.rows("/SlbNewCfgEnhRealServerTable/b2")[0]
	g.Expect(rs).To(And(HaveKeyWithValue("PingInterval", json.Number("2")), HaveKeyWithValue("FailRetry", json.Number("4")),
		HaveKeyWithValue("SuccRetry", json.Number("2"))), "the device's defaults")
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/b2", `{"FailRetry":3,"SuccRetry":2}`)
	c.apply()
	runtime := func(rs string) (any, any) {
		return c.rows("/SlbEnhRealServerInfoTable/" + rs)[0]["State"], c.rows("/SlbOperEnhGroupRealServerTable/g1/" + rs)[0]["RuntimeStatus"]
	}

	b2addr := b2.addr
	_ = b2.l.Close()
	for i := 1; i < 3; i++ {
		d.CheckHealth()
		g.Expect(d.FailedSince()).To(BeEmpty(), "%d failed checks of 3", i)
		counts := map[string]int{}
		for j := 0; j < 4; j++ {
			name, _ := try(addr)
			counts[name]++
		}
		g.Expect(counts).To(Equal(map[string]int{"b1": 2, "": 2}), "b2 still gets its turns, and they fail")
	}
	d.CheckHealth()
	g.Expect(d.FailedSince()).To(HaveKey("b2"))
	st, rt := runtime("b2")
	g.Expect(st).To(BeEquivalentTo("3"), "SlbEnhRealServerInfoTable: failed")
	g.Expect(rt).To(BeEquivalentTo("2"), "SlbOperEnhGroupRealServerTable: failed")
	st, rt = runtime("b1")
	g.Expect(st).To(BeEquivalentTo("2"))
	g.Expect(rt).To(BeEquivalentTo("1"))
	dropped := d.Dropped()["b2"]
	g.Expect(dropped).To(Equal(4))
	for i := 0; i < 4; i++ {
		g.Expect(hit(addr)).To(Equal("b1"))
	}

	// The server comes back: restored after SuccRetry (2) successful checks, not after one.
	l, err := net.Listen("tcp", b2addr)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(conn, "b2")
			_ = conn.Close()
		}
	}()
	d.CheckHealth()
	g.Expect(d.FailedSince()).To(HaveKey("b2"), "one success of 2")
	d.CheckHealth()
	g.Expect(d.FailedSince()).To(BeEmpty())
	st, rt = runtime("b2")
	g.Expect(st).To(BeEquivalentTo("2"))
	g.Expect(rt).To(BeEquivalentTo("1"))
	counts := map[string]int{}
	for j := 0; j < 4; j++ {
		counts[hit(addr)]++
	}
	g.Expect(counts).To(Equal(map[string]int{"b1": 2, "b2": 2}))
	g.Expect(d.Dropped()["b2"]).To(Equal(dropped), "nothing dropped once restored")
}

// TestDataPlaneHealthCheckScope: only groups with HealthID tcp are checked, and a real server
// with PingInterval 0 is not checked ("Zero means disabling ping attempt", MIB).
func TestDataPlaneHealthCheckScope(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes [][2]string
	}{
		{"no HealthID", [][2]string{{"/SlbNewCfgEnhGroupTable/g1", `{"HealthID":""}`}}},
		{"PingInterval 0", [][2]string{{"/SlbNewCfgEnhRealServerTable/dead", `{"PingInterval":0}`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d, c := startDevice(t, Options{DataPlane: true, HealthCheckManual: true})
			live := startBackend(t, "live")
			vip := "127.0.0.28"
			port := freePort(t, vip)
			seedService(c, vip, port, map[string]string{"live": live.addr, "dead": deadAddr(t)})
			for _, w := range tc.writes {
				c.ok("PUT", w[0], w[1])
			}
			c.apply()
			for i := 0; i < 6; i++ {
				d.CheckHealth()
			}
			g.Expect(d.FailedSince()).To(BeEmpty())
			g.Expect(c.rows("/SlbEnhRealServerInfoTable/dead")[0]["State"]).To(BeEquivalentTo("2"), "running: not checked")
			// Evidence the check would have failed it: with the defaults restored it does.
			c.ok("PUT", "/SlbNewCfgEnhGroupTable/g1", `{"HealthID":"tcp"}`)
			c.ok("PUT", "/SlbNewCfgEnhRealServerTable/dead", `{"PingInterval":2}`)
			c.apply()
			for i := 0; i < 4; i++ {
				d.CheckHealth()
			}
			g.Expect(d.FailedSince()).To(HaveKey("dead"))
		})
	}
}

// TestDataPlanePeriodicHealthCheck: without CheckHealth, the unit checks each server at its own
// PingInterval (scaled) and fails a dead one.
func TestDataPlanePeriodicHealthCheck(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{DataPlane: true, HealthCheckTimeScale: 0.01})
	live := startBackend(t, "live")
	vip := "127.0.0.29"
	port := freePort(t, vip)
	seedService(c, vip, port, map[string]string{"live": live.addr, "dead": deadAddr(t)})
	c.apply()
	g.Eventually(d.FailedSince, 10*time.Second, 10*time.Millisecond).Should(HaveKey("dead"))
	g.Consistently(d.FailedSince, 200*time.Millisecond, 20*time.Millisecond).ShouldNot(HaveKey("live"))
}

func TestDataPlaneFollowsMaster(t *testing.T) {
	g := NewWithT(t)
	p, a, b := startPair(t, Options{DataPlane: true}, Options{DataPlane: true})
	b1 := startBackend(t, "b1")
	vip := "127.0.0.25"
	port := freePort(t, vip)
	addr := net.JoinHostPort(vip, strconv.Itoa(port))
	seedBackends(t, a, vip, port, b1)
	a.apply()
	a.ok("POST", "?action=sync", "")
	g.Eventually(func() string { return a.scalar("agSyncStatus") }).Should(Equal("2"))
	g.Expect(p.A.Listening()).To(HaveLen(1))
	g.Expect(p.B.Listening()).To(BeEmpty(), "the backup does not forward")
	g.Expect(hit(addr)).To(Equal("b1"))

	p.Failover()
	g.Expect(p.A.Listening()).To(BeEmpty())
	g.Expect(p.B.Listening()).To(Equal([]string{"tcp " + addr}))
	g.Expect(hit(addr)).To(Equal("b1"), "the new master serves the synced VIP")
	g.Expect(p.B.Served()).To(HaveKeyWithValue("b1", 1))
	_ = b
}

func TestDataPlaneBindErrorIsReported(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{DataPlane: true})
	taken, err := net.Listen("tcp", "127.0.0.26:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	b1 := startBackend(t, "b1")
	seedBackends(t, c, "127.0.0.26", port, b1)
	c.apply()
	errs := d.BindErrors()
	g.Expect(errs).To(HaveLen(1))
	for k, v := range errs {
		g.Expect(k).To(Equal(fmt.Sprintf("tcp 127.0.0.26:%d", port)))
		g.Expect(strings.ToLower(v)).To(ContainSubstring("in use"))
	}
}

// try opens one connection to addr and returns the backend name it reached, or the error that
// ended it: a refused dial, or a reset after the data plane accepted the connection.
func try(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(c, buf, 1)
	if n == 0 {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(buf[:n]), nil
}

// deadAddr is a loopback address where nothing listens (connections are refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestDataPlaneDeadMemberFailsItsTurns: a real Alteon at L4 sends the client's connection to the
// real server the metric chose; when that server refuses, the client sees the failure, and nothing
// else is tried until a health check fails the server. Round robin over one live and one dead
// member (no health check) fails every dead member's turn, with a reset.
func TestDataPlaneDeadMemberFailsItsTurns(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{DataPlane: true})
	live := startBackend(t, "live")
	vip := "127.0.0.27"
	port := freePort(t, vip)
	addr := net.JoinHostPort(vip, strconv.Itoa(port))
	seedService(c, vip, port, map[string]string{"live": live.addr, "dead": deadAddr(t)})
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g1", `{"HealthID":""}`)
	c.apply()

	counts := map[string]int{}
	for i := 0; i < 10; i++ {
		name, err := try(addr)
		if err != nil {
			g.Expect(errors.Is(err, syscall.ECONNRESET)).To(BeTrue(), "a failed turn is a reset, got %v", err)
			name = "failed"
		}
		counts[name]++
	}
	g.Expect(counts).To(Equal(map[string]int{"live": 5, "failed": 5}), "every second connection is the dead member's")
}
