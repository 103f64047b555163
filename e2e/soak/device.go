package soak

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/lbfed/lbfed/elb/radware/alteon"
)

// Member is one real server of a virtual service's group on a unit, as the device holds it.
type Member struct {
	IP     string
	Port   int
	Weight int
	// Enabled: the membership lets new connections in (not disabled, not draining).
	Enabled bool
}

func (m Member) String() string {
	s := m.IP + ":" + strconv.Itoa(m.Port) + "/w" + strconv.Itoa(m.Weight)
	if !m.Enabled {
		s += "(off)"
	}
	return s
}

// Unit is what one Alteon unit holds for the checks: per VIP:port, its virtual services and
// the members of their groups.
type Unit struct {
	Name string
	// Members per "vip:port", sorted.
	Members map[string][]Member
	// Services counts the virtual services per "vip:port" (one per LoadBalancer).
	Services map[string]int
	// Orphans are real servers that no group bound to a virtual service holds.
	Orphans []string
}

// ReadUnit reads a unit's configuration through its REST API (what the driver wrote there;
// the backup's is what the last sync copied).
func ReadUnit(ctx context.Context, name string, c *alteon.Client) (Unit, error) {
	u := Unit{Name: name, Members: map[string][]Member{}, Services: map[string]int{}}
	tables := map[string][]alteon.Row{}
	for _, t := range []string{alteon.TableVirtServer, alteon.TableVirtService, alteon.TableVirtServiceGroup,
		alteon.TableGroupRealServer, alteon.TableRealServer, alteon.TableRealServerPort} {
		rows, err := c.List(ctx, t)
		if err != nil {
			return u, fmt.Errorf("read %s of %s: %w", t, name, err)
		}
		tables[t] = rows
	}
	vip := map[string]string{}
	for _, r := range tables[alteon.TableVirtServer] {
		vip[r.Str("VirtServerIndex")] = r.Str("VirtServerIpAddress")
	}
	type svc struct{ server, index string }
	groupOf := map[svc]string{}
	for _, r := range tables[alteon.TableVirtServiceGroup] {
		groupOf[svc{r.Str("ServSeventhPartIndex"), r.Str("SeventhPartIndex")}] = r.Str("RealGroup")
	}
	type rs struct {
		ip     string
		weight int
		port   int
	}
	servers := map[string]*rs{}
	for _, r := range tables[alteon.TableRealServer] {
		servers[r.Str("Index")] = &rs{ip: r.Str("IpAddr"), weight: r.Int("Weight")}
	}
	for _, r := range tables[alteon.TableRealServerPort] {
		if s := servers[r.Str("Index")]; s != nil && s.port == 0 {
			s.port = r.Int("RealPort")
		}
	}
	members := map[string][]alteon.Row{}
	for _, r := range tables[alteon.TableGroupRealServer] {
		members[r.Str("RealServGroupIndex")] = append(members[r.Str("RealServGroupIndex")], r)
	}
	held := map[string]bool{}
	for _, r := range tables[alteon.TableVirtService] {
		server, index := r.Str("ServIndex"), r.Str("Index")
		key := vip[server] + ":" + r.Str("VirtPort")
		u.Services[key]++
		group := groupOf[svc{server, index}]
		realPort := r.Int("RealPort")
		for _, m := range members[group] {
			s := servers[m.Str("ServIndex")]
			if s == nil {
				u.Orphans = append(u.Orphans, "group "+group+" member "+m.Str("ServIndex")+" without a real server")
				continue
			}
			held[m.Str("ServIndex")] = true
			port := s.port
			if realPort != 0 {
				port = realPort
			}
			u.Members[key] = append(u.Members[key], Member{IP: s.ip, Port: port, Weight: s.weight, Enabled: m.Int("State") == int(alteon.MemberEnabled)})
		}
	}
	for idx, s := range servers {
		if !held[idx] {
			u.Orphans = append(u.Orphans, "real server "+idx+" "+s.ip)
		}
	}
	for k := range u.Members {
		SortMembers(u.Members[k])
	}
	sort.Strings(u.Orphans)
	return u, nil
}

// SortMembers orders members by address, port, weight.
func SortMembers(ms []Member) {
	sort.Slice(ms, func(i, j int) bool { return ms[i].String() < ms[j].String() })
}
