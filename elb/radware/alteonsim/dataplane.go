package alteonsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// svcKey names a virtual service: virtual server index and service slot.
type svcKey struct {
	vs  string
	idx int64
}

type member struct {
	id     string
	addr   string
	weight int64
}

// dataPlane forwards traffic from the VIP:port of every applied, enabled virtual service to the
// enabled members of its group. Only the master's data plane is active.
type dataPlane struct {
	log logr.Logger

	mu        sync.Mutex
	cfg       *config
	active    bool
	closed    bool
	tcp       map[listenSpec]*tcpListener
	udp       map[listenSpec]*udpListener
	bindErrs  map[listenSpec]error
	conns     map[net.Conn]struct{}
	rr        map[string]map[string]int64 // group -> member -> current weight (smooth WRR)
	open      map[string]int              // real server -> open connections
	served    map[string]int              // real server -> connections forwarded so far
	health    map[string]bool             // real server -> last health check result
	hcEvery   time.Duration
	hcStop    chan struct{}
	udpIdle   time.Duration
	dialLimit time.Duration
}

func newDataPlane(log logr.Logger, hcEvery time.Duration) *dataPlane {
	return &dataPlane{
		log:       log.WithName("dataplane"),
		cfg:       newConfig(),
		tcp:       map[listenSpec]*tcpListener{},
		udp:       map[listenSpec]*udpListener{},
		bindErrs:  map[listenSpec]error{},
		conns:     map[net.Conn]struct{}{},
		rr:        map[string]map[string]int64{},
		open:      map[string]int{},
		served:    map[string]int{},
		health:    map[string]bool{},
		hcEvery:   hcEvery,
		udpIdle:   30 * time.Second,
		dialLimit: 2 * time.Second,
	}
}

type tcpListener struct {
	key svcKey
	l   net.Listener
}

type udpListener struct {
	key svcKey
	pc  net.PacketConn
}

// desired lists the endpoints the running configuration asks for.
func desiredListeners(cfg *config) map[listenSpec]svcKey {
	out := map[listenSpec]svcKey{}
	for _, svc := range cfg.list(stVirtService) {
		vs := cfg.get(stVirtServer, svc.idx[:1])
		if vs == nil || vs.int("VirtServerState") != 2 {
			continue
		}
		ip := vs.str("VirtServerIpAddress")
		if ip == "0.0.0.0" || svc.int("VirtPort") <= 1 {
			continue
		}
		for _, ls := range listenKeys(ip, svc) {
			if _, dup := out[ls]; !dup {
				out[ls] = svcKey{svc.idxString(0), svc.idx[1].(int64)}
			}
		}
	}
	return out
}

// update installs a new running configuration and (de)activates the data plane.
func (dp *dataPlane) update(cfg *config, active bool) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return
	}
	dp.cfg = cfg
	dp.active = active
	want := map[listenSpec]svcKey{}
	if active {
		want = desiredListeners(cfg)
	}
	for ls, l := range dp.tcp {
		if k, ok := want[ls]; !ok || k != l.key {
			_ = l.l.Close()
			delete(dp.tcp, ls)
		}
	}
	for ls, l := range dp.udp {
		if k, ok := want[ls]; !ok || k != l.key {
			_ = l.pc.Close()
			delete(dp.udp, ls)
		}
	}
	for ls := range dp.bindErrs {
		if _, ok := want[ls]; !ok {
			delete(dp.bindErrs, ls)
		}
	}
	for ls, key := range want {
		addr := net.JoinHostPort(ls.ip, strconv.FormatInt(ls.port, 10))
		if ls.udp {
			if _, ok := dp.udp[ls]; ok {
				continue
			}
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				dp.bindErrs[ls] = err
				dp.log.Error(err, "cannot serve virtual service", "service", key.vs, "addr", addr, "protocol", "udp")
				continue
			}
			delete(dp.bindErrs, ls)
			ul := &udpListener{key: key, pc: pc}
			dp.udp[ls] = ul
			go dp.serveUDP(ul)
			continue
		}
		if _, ok := dp.tcp[ls]; ok {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			dp.bindErrs[ls] = err
			dp.log.Error(err, "cannot serve virtual service", "service", key.vs, "addr", addr, "protocol", "tcp")
			continue
		}
		delete(dp.bindErrs, ls)
		tl := &tcpListener{key: key, l: l}
		dp.tcp[ls] = tl
		go dp.serveTCP(tl)
	}
	if active && dp.hcEvery > 0 && dp.hcStop == nil {
		dp.hcStop = make(chan struct{})
		go dp.healthLoop(dp.hcStop)
	}
	if !active && dp.hcStop != nil {
		close(dp.hcStop)
		dp.hcStop = nil
	}
}

func (dp *dataPlane) close() {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	dp.closed = true
	for _, l := range dp.tcp {
		_ = l.l.Close()
	}
	for _, l := range dp.udp {
		_ = l.pc.Close()
	}
	for c := range dp.conns {
		_ = c.Close()
	}
	if dp.hcStop != nil {
		close(dp.hcStop)
		dp.hcStop = nil
	}
}

func (dp *dataPlane) healthy(rs string) bool {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	ok, known := dp.health[rs]
	return !known || ok
}

// candidates returns the metric and the members that may receive new connections (dp.mu held).
func (dp *dataPlane) candidates(key svcKey) (string, int64, []member) {
	cfg := dp.cfg
	svc := cfg.get(stVirtService, []any{key.vs, key.idx})
	if svc == nil {
		return "", 0, nil
	}
	gname := svc.str("RealGroup")
	g := cfg.get(stGroup, []any{gname})
	if g == nil {
		return gname, 0, nil
	}
	var out []member
	for _, m := range cfg.children(stGroupMember, []any{gname}) {
		if m.int("State") != 1 {
			continue // disabled or draining: no new connections
		}
		id := m.idxString(1)
		rs := cfg.get(stRealServer, []any{id})
		if rs == nil || rs.int("State") != 2 {
			continue
		}
		if ok, known := dp.health[id]; known && !ok {
			continue
		}
		out = append(out, member{id: id, addr: net.JoinHostPort(rs.str("IpAddr"), strconv.FormatInt(realPort(cfg, svc, id), 10)), weight: rs.int("Weight")})
	}
	return gname, g.int("Metric"), out
}

// realPort is the port a member receives: the service's RealPort, or with RealPort 0
// ("multiple real ports") the real server's first configured port, or the virtual port.
func realPort(cfg *config, svc *row, rs string) int64 {
	if p := svc.int("RealPort"); p > 1 {
		return p
	}
	for _, p := range cfg.children(stRealPort, []any{rs}) {
		if rp := p.int("RealPort"); rp > 0 {
			return rp
		}
	}
	return svc.int("VirtPort")
}

// pick orders the candidates for one new connection: the metric's choice first, then the others
// as fallbacks when a dial fails (dp.mu held).
func (dp *dataPlane) pick(group string, metric int64, ms []member, client net.Addr) []member {
	if len(ms) <= 1 {
		return ms
	}
	var first int
	switch metric {
	case 2, 8: // leastConnections, svcLeast
		best := -1.0
		for i, m := range ms {
			w := float64(max(m.weight, 1))
			load := float64(dp.open[m.id]) / w
			if best < 0 || load < best {
				best, first = load, i
			}
		}
	case 4, 7, 9: // hash, phash, hrw: client address hash
		host, _, _ := net.SplitHostPort(client.String())
		h := fnv.New32a()
		_, _ = io.WriteString(h, host)
		first = int(h.Sum32() % uint32(len(ms)))
	default: // roundRobin and the rest: smooth weighted round robin
		st := dp.rr[group]
		if st == nil {
			st = map[string]int64{}
			dp.rr[group] = st
		}
		present := make(map[string]bool, len(ms))
		var total int64
		for i, m := range ms {
			w := max(m.weight, 1)
			total += w
			st[m.id] += w
			present[m.id] = true
			if i == 0 || st[m.id] > st[ms[first].id] {
				first = i
			}
		}
		for id := range st {
			if !present[id] {
				delete(st, id)
			}
		}
		st[ms[first].id] -= total
	}
	out := append([]member{ms[first]}, ms[:first]...)
	return append(out, ms[first+1:]...)
}

func (dp *dataPlane) serveTCP(tl *tcpListener) {
	for {
		c, err := tl.l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				dp.log.Error(err, "accept failed", "service", tl.key.vs)
			}
			return
		}
		go dp.proxyTCP(tl.key, c)
	}
}

func (dp *dataPlane) track(c net.Conn, add bool) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if add {
		dp.conns[c] = struct{}{}
	} else {
		delete(dp.conns, c)
	}
}

func (dp *dataPlane) proxyTCP(key svcKey, client net.Conn) {
	dp.track(client, true)
	defer dp.track(client, false)
	defer client.Close()
	dp.mu.Lock()
	group, metric, ms := dp.candidates(key)
	order := dp.pick(group, metric, ms, client.RemoteAddr())
	dp.mu.Unlock()
	var backend net.Conn
	var chosen member
	for _, m := range order {
		c, err := net.DialTimeout("tcp", m.addr, dp.dialLimit)
		if err == nil {
			backend, chosen = c, m
			break
		}
		dp.log.V(1).Info("member unreachable", "service", key.vs, "member", m.id, "addr", m.addr, "err", err.Error())
	}
	if backend == nil {
		return
	}
	dp.track(backend, true)
	defer dp.track(backend, false)
	dp.mu.Lock()
	dp.open[chosen.id]++
	dp.served[chosen.id]++
	dp.mu.Unlock()
	defer func() {
		dp.mu.Lock()
		dp.open[chosen.id]--
		dp.mu.Unlock()
	}()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
	_ = backend.Close()
}

type udpSession struct {
	backend *net.UDPConn
	member  string
}

func (dp *dataPlane) serveUDP(ul *udpListener) {
	var mu sync.Mutex
	sessions := map[string]*udpSession{}
	buf := make([]byte, 64<<10)
	for {
		n, from, err := ul.pc.ReadFrom(buf)
		if err != nil {
			mu.Lock()
			for _, s := range sessions {
				_ = s.backend.Close()
			}
			mu.Unlock()
			return
		}
		mu.Lock()
		s := sessions[from.String()]
		mu.Unlock()
		if s == nil {
			dp.mu.Lock()
			group, metric, ms := dp.candidates(ul.key)
			order := dp.pick(group, metric, ms, from)
			dp.mu.Unlock()
			for _, m := range order {
				raddr, err := net.ResolveUDPAddr("udp", m.addr)
				if err != nil {
					continue
				}
				c, err := net.DialUDP("udp", nil, raddr)
				if err != nil {
					continue
				}
				s = &udpSession{backend: c, member: m.id}
				break
			}
			if s == nil {
				continue
			}
			mu.Lock()
			sessions[from.String()] = s
			mu.Unlock()
			dp.mu.Lock()
			dp.served[s.member]++
			dp.mu.Unlock()
			go func(s *udpSession, client net.Addr) {
				rb := make([]byte, 64<<10)
				for {
					_ = s.backend.SetReadDeadline(time.Now().Add(dp.udpIdle))
					n, err := s.backend.Read(rb)
					if err != nil {
						break
					}
					if _, err := ul.pc.WriteTo(rb[:n], client); err != nil {
						break
					}
				}
				_ = s.backend.Close()
				mu.Lock()
				delete(sessions, client.String())
				mu.Unlock()
			}(s, from)
		}
		_, _ = s.backend.Write(buf[:n])
	}
}

func (dp *dataPlane) healthLoop(stop chan struct{}) {
	t := time.NewTicker(dp.hcEvery)
	defer t.Stop()
	for {
		dp.checkOnce()
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// checkOnce TCP-connects to every member of groups whose HealthID is "tcp".
func (dp *dataPlane) checkOnce() {
	dp.mu.Lock()
	cfg := dp.cfg
	dp.mu.Unlock()
	targets := map[string]string{}
	for _, g := range cfg.list(stGroup) {
		if !strings.EqualFold(g.str("HealthID"), "tcp") {
			continue
		}
		var svc *row
		for _, s := range cfg.list(stVirtService) {
			if s.str("RealGroup") == g.idxString(0) {
				svc = s
				break
			}
		}
		for _, m := range cfg.children(stGroupMember, g.idx) {
			rs := cfg.get(stRealServer, m.idx[1:2])
			if rs == nil {
				continue
			}
			port := int64(0)
			for _, p := range cfg.children(stRealPort, rs.idx) {
				if p.int("RealPort") > 0 {
					port = p.int("RealPort")
					break
				}
			}
			if port == 0 && svc != nil {
				port = realPort(cfg, svc, m.idxString(1))
			}
			if port > 0 {
				targets[m.idxString(1)] = net.JoinHostPort(rs.str("IpAddr"), strconv.FormatInt(port, 10))
			}
		}
	}
	timeout := min(dp.hcEvery, time.Second)
	results := map[string]bool{}
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for id, addr := range targets {
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", addr, timeout)
			if err == nil {
				_ = c.Close()
			}
			rmu.Lock()
			results[id] = err == nil
			rmu.Unlock()
		}(id, addr)
	}
	wg.Wait()
	dp.mu.Lock()
	dp.health = results
	dp.mu.Unlock()
}

// Listening lists the endpoints ("tcp 127.0.0.2:8080") the unit's data plane serves.
func (d *Device) Listening() []string {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	var out []string
	for ls := range dp.tcp {
		out = append(out, "tcp "+net.JoinHostPort(ls.ip, strconv.FormatInt(ls.port, 10)))
	}
	for ls := range dp.udp {
		out = append(out, "udp "+net.JoinHostPort(ls.ip, strconv.FormatInt(ls.port, 10)))
	}
	sort.Strings(out)
	return out
}

// BindErrors lists endpoints the data plane could not listen on, with the error.
func (d *Device) BindErrors() map[string]string {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := map[string]string{}
	for ls, err := range dp.bindErrs {
		proto := "tcp"
		if ls.udp {
			proto = "udp"
		}
		out[fmt.Sprintf("%s %s", proto, net.JoinHostPort(ls.ip, strconv.FormatInt(ls.port, 10)))] = err.Error()
	}
	return out
}

// Served returns, per real server, how many connections (TCP) or sessions (UDP) were forwarded.
func (d *Device) Served() map[string]int {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := make(map[string]int, len(dp.served))
	for k, v := range dp.served {
		out[k] = v
	}
	return out
}

// ActiveConnections returns the number of open forwarded TCP connections per real server.
func (d *Device) ActiveConnections() map[string]int {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := map[string]int{}
	for k, v := range dp.open {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}

// CheckHealth runs one health-check round now (tests use it instead of waiting for the ticker).
func (d *Device) CheckHealth() { d.dp.checkOnce() }
