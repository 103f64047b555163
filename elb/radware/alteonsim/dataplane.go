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
	dropped   map[string]int              // real server -> connections reset: it did not answer
	hc        map[string]*hcState         // real server -> health-check state (checked servers only)
	hcScale   float64                     // simulated duration of one PingInterval second, in seconds
	hcManual  bool                        // no periodic checks: rounds run through CheckHealth only
	hcStop    chan struct{}
	hcWake    chan struct{}
	udpIdle   time.Duration
	dialLimit time.Duration
}

func newDataPlane(log logr.Logger, hcScale float64, hcManual bool) *dataPlane {
	if hcScale <= 0 {
		hcScale = 1
	}
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
		dropped:   map[string]int{},
		hc:        map[string]*hcState{},
		hcScale:   hcScale,
		hcManual:  hcManual,
		hcWake:    make(chan struct{}, 1),
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
	if active && !dp.hcManual && dp.hcStop == nil {
		dp.hcStop = make(chan struct{})
		go dp.healthLoop(dp.hcStop)
	}
	select { // a new configuration may add servers to check: look at once
	case dp.hcWake <- struct{}{}:
	default:
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

// healthy reports whether the health check has not failed the real server (servers that are not
// checked are always healthy).
func (dp *dataPlane) healthy(rs string) bool {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	st := dp.hc[rs]
	return st == nil || !st.failed
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
		if st := dp.hc[id]; st != nil && st.failed {
			continue // failed by its health check: no new connections
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

// pick is the metric's choice of a member for one new connection; false when there is no
// candidate (dp.mu held). The choice is final: a member that does not answer is not replaced by
// another (see proxyTCP).
func (dp *dataPlane) pick(group string, metric int64, ms []member, client net.Addr) (member, bool) {
	if len(ms) == 0 {
		return member{}, false
	}
	if len(ms) == 1 {
		return ms[0], true
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
	return ms[first], true
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
	dp.mu.Lock()
	group, metric, ms := dp.candidates(key)
	chosen, ok := dp.pick(group, metric, ms, client.RemoteAddr())
	dp.mu.Unlock()
	if !ok {
		dp.log.V(1).Info("no real server available", "service", key.vs)
		reset(client)
		return
	}
	// The device forwards the client's connection to the chosen real server: a refusal or no
	// answer reaches the client, and no other server is tried.
	backend, err := net.DialTimeout("tcp", chosen.addr, dp.dialLimit)
	if err != nil {
		dp.log.V(1).Info("real server did not answer; resetting the client", "service", key.vs, "member", chosen.id, "addr", chosen.addr, "err", err.Error())
		dp.mu.Lock()
		dp.dropped[chosen.id]++
		dp.mu.Unlock()
		reset(client)
		return
	}
	defer client.Close()
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

// reset closes an accepted client connection with a TCP reset (as a refused connection looks
// once the handshake is done), not an orderly close the client could take for an empty answer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
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
			m, ok := dp.pick(group, metric, ms, from)
			dp.mu.Unlock()
			if !ok {
				continue // no real server: the datagram is dropped
			}
			// As for TCP the choice is final: datagrams a dead server does not answer are lost.
			raddr, err := net.ResolveUDPAddr("udp", m.addr)
			if err != nil {
				continue
			}
			c, err := net.DialUDP("udp", nil, raddr)
			if err != nil {
				dp.mu.Lock()
				dp.dropped[m.id]++
				dp.mu.Unlock()
				continue
			}
			s = &udpSession{backend: c, member: m.id}
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

// hcState is the health of one checked real server: the device fails it after FailRetry
// consecutive failed checks and restores it after SuccRetry consecutive successful ones.
type hcState struct {
	failed   bool
	since    time.Time // when failed last changed (or the server was first checked)
	fails    int       // consecutive failed checks
	succs    int       // consecutive successful checks
	next     time.Time // when the next check is due
	inFlight bool
}

// hcTarget is one real server to check and its settings, from SlbNewCfgEnhRealServerTable.
type hcTarget struct {
	addr        string
	every       time.Duration // PingInterval, scaled
	fail, restr int           // FailRetry, SuccRetry (0 taken as 1)
}

// hcTargets lists the real servers the device checks: members of groups whose HealthID is "tcp"
// with a PingInterval above 0 (the MIB: "Zero means disabling ping attempt"). The port checked is
// the real server's first real port, else the one its service sends to.
func (dp *dataPlane) hcTargets(cfg *config) map[string]hcTarget {
	targets := map[string]hcTarget{}
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
			if rs == nil || rs.int("PingInterval") <= 0 {
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
			if port <= 0 {
				continue
			}
			targets[m.idxString(1)] = hcTarget{
				addr:  net.JoinHostPort(rs.str("IpAddr"), strconv.FormatInt(port, 10)),
				every: time.Duration(float64(rs.int("PingInterval")) * dp.hcScale * float64(time.Second)),
				fail:  int(max(rs.int("FailRetry"), 1)),
				restr: int(max(rs.int("SuccRetry"), 1)),
			}
		}
	}
	return targets
}

// probeTimeout bounds one check: the interval, at most 2 s (the simulator's choice; the device's
// health-check timeout is its own setting, not modelled).
func probeTimeout(t hcTarget) time.Duration { return min(t.every, 2*time.Second) }

// probe is one TCP health check: a connection that opens is closed at once.
func probe(t hcTarget) bool {
	c, err := net.DialTimeout("tcp", t.addr, probeTimeout(t))
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// record applies one check result (dp.mu held). Results for a state no longer current (the
// server stopped being checked meanwhile) are ignored.
func (dp *dataPlane) record(id string, st *hcState, t hcTarget, ok bool, now time.Time) {
	if dp.hc[id] != st {
		return
	}
	if ok {
		st.fails, st.succs = 0, st.succs+1
		if st.failed && st.succs >= t.restr {
			st.failed, st.since = false, now
			dp.log.Info("real server restored by its health check", "realServer", id, "addr", t.addr, "successes", st.succs)
		}
		return
	}
	st.succs, st.fails = 0, st.fails+1
	if !st.failed && st.fails >= t.fail {
		st.failed, st.since = true, now
		dp.log.Info("real server failed by its health check", "realServer", id, "addr", t.addr, "failures", st.fails)
	}
}

// prune forgets servers that are no longer checked (they count as healthy) and starts the state
// of new ones, due at once (dp.mu held).
func (dp *dataPlane) prune(targets map[string]hcTarget, now time.Time) {
	for id := range dp.hc {
		if _, ok := targets[id]; !ok {
			delete(dp.hc, id)
		}
	}
	for id := range targets {
		if dp.hc[id] == nil {
			// A new server starts running (an assumption: the device's initial state is unverified).
			dp.hc[id] = &hcState{since: now, next: now}
		}
	}
}

// healthLoop checks every server when its own interval is due, until stop.
func (dp *dataPlane) healthLoop(stop chan struct{}) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		case <-dp.hcWake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		timer.Reset(dp.checkDue(time.Now()))
	}
}

// checkDue starts the checks that are due and returns how long until the next one.
func (dp *dataPlane) checkDue(now time.Time) time.Duration {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	targets := dp.hcTargets(dp.cfg)
	dp.prune(targets, now)
	wait := time.Second // idle: a configuration change wakes the loop
	for id, t := range targets {
		st := dp.hc[id]
		if !st.inFlight && !now.Before(st.next) {
			st.inFlight = true
			st.next = now.Add(t.every)
			go func(id string, st *hcState, t hcTarget) {
				ok := probe(t)
				dp.mu.Lock()
				st.inFlight = false
				dp.record(id, st, t, ok, time.Now())
				dp.mu.Unlock()
				select { // the next check may be due already (a probe that timed out)
				case dp.hcWake <- struct{}{}:
				default:
				}
			}(id, st, t)
		}
		if d := st.next.Sub(now); d < wait {
			wait = d
		}
	}
	return max(wait, time.Millisecond)
}

// checkOnce runs one check of every checked server now and waits for the results.
func (dp *dataPlane) checkOnce() {
	now := time.Now()
	dp.mu.Lock()
	targets := dp.hcTargets(dp.cfg)
	dp.prune(targets, now)
	states := make(map[string]*hcState, len(targets))
	for id := range targets {
		states[id] = dp.hc[id]
	}
	dp.mu.Unlock()
	results := make(map[string]bool, len(targets))
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for id, t := range targets {
		wg.Add(1)
		go func(id string, t hcTarget) {
			defer wg.Done()
			ok := probe(t)
			rmu.Lock()
			results[id] = ok
			rmu.Unlock()
		}(id, t)
	}
	wg.Wait()
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for id, ok := range results {
		dp.record(id, states[id], targets[id], ok, time.Now())
	}
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

// CheckHealth runs one health check of every checked real server now, whatever its interval, and
// waits for the results (tests step the health state with it, usually with HealthCheckManual). A
// server fails after FailRetry such rounds fail in a row and is restored after SuccRetry succeed.
func (d *Device) CheckHealth() { d.dp.checkOnce() }

// Dropped returns, per real server, how many client connections (TCP) or sessions (UDP) were
// reset or lost because the server the metric chose did not answer.
func (d *Device) Dropped() map[string]int {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := make(map[string]int, len(dp.dropped))
	for k, v := range dp.dropped {
		out[k] = v
	}
	return out
}

// FailedSince returns the real servers their health check has failed, with when it failed them.
func (d *Device) FailedSince() map[string]time.Time {
	dp := d.dp
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := map[string]time.Time{}
	for id, st := range dp.hc {
		if st.failed {
			out[id] = st.since
		}
	}
	return out
}
