package alteonsim

import (
	"errors"
	"sync"
)

// Pair is an HA pair in switch-HA mode: two units that are each other's configuration-sync peer,
// one master and one backup.
type Pair struct {
	A, B *Device
	mu   sync.Mutex // serialises role changes
}

// NewPair creates two units. Unset names and management addresses default to alteon-a/alteon-b
// and 192.0.2.1/192.0.2.2; A starts as master. Each unit's peer table (pending, running and
// flash) points at the other, enabled.
func NewPair(a, b Options) *Pair {
	if a.Name == "" {
		a.Name = "alteon-a"
	}
	if b.Name == "" {
		b.Name = "alteon-b"
	}
	if a.MgmtIP == "" {
		a.MgmtIP = "192.0.2.1"
	}
	if b.MgmtIP == "" {
		b.MgmtIP = "192.0.2.2"
	}
	p := &Pair{A: New(a), B: New(b)}
	p.A.pair, p.B.pair = p, p
	p.B.role = RoleBackup
	for _, link := range [][2]*Device{{p.A, p.B}, {p.B, p.A}} {
		d, peer := link[0], link[1]
		r := &row{idx: []any{int64(1)}, vals: map[string]any{}}
		for i := range stores[stPeer].cols {
			c := &stores[stPeer].cols[i]
			if !c.delete {
				r.vals[c.name] = c.zero()
			}
		}
		r.vals["IpAddr"] = peer.opts.MgmtIP
		r.vals["State"] = int64(1)
		for _, cfg := range []*config{d.pending, d.running, d.flash} {
			cfg.put(stPeer, r.clone())
		}
	}
	return p
}

// Start serves both units' REST APIs on loopback ports and returns their base URLs.
func (p *Pair) Start() (urlA, urlB string, err error) {
	if urlA, err = p.A.Start("127.0.0.1:0"); err != nil {
		return "", "", err
	}
	if urlB, err = p.B.Start("127.0.0.1:0"); err != nil {
		_ = p.A.Close()
		return "", "", err
	}
	return urlA, urlB, nil
}

// Close stops both units.
func (p *Pair) Close() error {
	return errors.Join(p.A.Close(), p.B.Close())
}

// Units returns both units.
func (p *Pair) Units() []*Device { return []*Device{p.A, p.B} }

// Master returns the unit in the master role (A when both are), or nil.
func (p *Pair) Master() *Device {
	for _, d := range p.Units() {
		if d.Role() == RoleMaster {
			return d
		}
	}
	return nil
}

// Backup returns the unit in the backup role (nil when none is).
func (p *Pair) Backup() *Device {
	for _, d := range p.Units() {
		if d.Role() == RoleBackup {
			return d
		}
	}
	return nil
}

// Failover moves mastership to the other unit: the master becomes backup, then the backup
// becomes master (so the data plane never has both listening). With no master, A takes over.
func (p *Pair) Failover() {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.Master()
	if m == nil {
		p.A.SetRole(RoleMaster)
		return
	}
	m.SetRole(RoleBackup)
	p.peerOf(m).SetRole(RoleMaster)
}

// failoverFrom handles haOperSwitchBackup on d: only the current master can hand over.
func (p *Pair) failoverFrom(d *Device) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d.Role() != RoleMaster {
		return
	}
	d.SetRole(RoleBackup)
	p.peerOf(d).SetRole(RoleMaster)
}

// SetRoles forces both roles, e.g. split brain (master, master) or (backup, backup).
func (p *Pair) SetRoles(a, b Role) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// Demote before promoting so that listeners move cleanly.
	if a != RoleMaster {
		p.A.SetRole(a)
	}
	if b != RoleMaster {
		p.B.SetRole(b)
	}
	if a == RoleMaster {
		p.A.SetRole(a)
	}
	if b == RoleMaster {
		p.B.SetRole(b)
	}
}

func (p *Pair) peerOf(d *Device) *Device {
	if d == p.A {
		return p.B
	}
	return p.A
}

func (p *Pair) byMgmtIP(ip string) *Device {
	for _, d := range p.Units() {
		if d.opts.MgmtIP == ip {
			return d
		}
	}
	return nil
}
