package alteonsim

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// colKind is the SNMP syntax of a column as the REST bridge exposes it.
type colKind int

const (
	kindString colKind = iota // DisplayString: accepts a string or a number
	kindInt                   // Integer32 with a range: accepts a number or a numeric string
	kindEnum                  // enumerated INTEGER
	kindIP                    // IpAddress (dotted quad)
)

// column describes one MIB column.
type column struct {
	name     string
	kind     colKind
	min, max int64            // integer range, or DisplayString length range
	valid    func(int64) bool // extra integer check (e.g. VirtPort 1 or 9..65534)
	enum     map[int64]string
	def      any  // default of a new row (int64 or string); nil means "0" / ""
	readOnly bool // rejected on write
	action   bool // write-only action column: reads back as 0
	delete   bool // writing delete(2) deletes the row
}

// parse converts a JSON value (already decoded with UseNumber) into the stored form: int64 or string.
func (c *column) parse(v any) (any, bool) {
	switch c.kind {
	case kindString:
		var s string
		switch t := v.(type) {
		case string:
			s = t
		case json.Number:
			s = t.String()
		case bool:
			return nil, false
		default:
			return nil, false
		}
		if int64(len(s)) < c.min || int64(len(s)) > c.max {
			return nil, false
		}
		return s, true
	case kindIP:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		ip := net.ParseIP(strings.TrimSpace(s))
		if ip == nil || ip.To4() == nil {
			return nil, false
		}
		return ip.To4().String(), true
	case kindInt, kindEnum:
		var n int64
		switch t := v.(type) {
		case json.Number:
			i, err := strconv.ParseInt(t.String(), 10, 64)
			if err != nil {
				return nil, false
			}
			n = i
		case string:
			i, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
			if err != nil {
				return nil, false
			}
			n = i
		default:
			return nil, false
		}
		if c.kind == kindEnum {
			if _, ok := c.enum[n]; !ok {
				return nil, false
			}
			return n, true
		}
		if n < c.min || n > c.max || (c.valid != nil && !c.valid(n)) {
			return nil, false
		}
		return n, true
	}
	return nil, false
}

// zero is the value a new row has for the column.
func (c *column) zero() any {
	if c.def != nil {
		return c.def
	}
	if c.kind == kindString {
		return ""
	}
	if c.kind == kindIP {
		return "0.0.0.0"
	}
	return int64(0)
}

// storeSchema is one configuration table: the rows every NewCfg/CurCfg view of it shares.
type storeSchema struct {
	name  string
	index []column // index columns in INDEX order (canonical names of the primary view)
	cols  []column // every non-index column of every view
	// parent, when set, is the store whose row (first len(parentIdx) index values) must exist for a
	// row of this store to be created, and whose deletion cascades to this store.
	parent string
}

func (s *storeSchema) col(name string) *column {
	for i := range s.cols {
		if s.cols[i].name == name {
			return &s.cols[i]
		}
	}
	return nil
}

// source says which copy of the configuration a view reads.
type source int

const (
	srcNew source = iota // pending configuration (NewCfg); writable
	srcCur               // running configuration (CurCfg); read-only
)

// view is one REST table: a named projection of a store.
type view struct {
	name     string
	store    *storeSchema
	index    []string // index key names as this table spells them
	cols     []string // columns exposed (subset of store.cols); nil = all
	src      source
	readOnly bool
	// continuation marks a …SecondPartTable…SeventhPartTable: it extends rows of the main table
	// and cannot create them.
	continuation bool
	// membershipOnly marks SlbEnhGroupRealServersTable: index columns only, no state.
	membershipOnly bool
}

func (v *view) columns() []*column {
	if v.membershipOnly {
		return nil
	}
	var out []*column
	if v.cols == nil {
		for i := range v.store.cols {
			out = append(out, &v.store.cols[i])
		}
		return out
	}
	for _, n := range v.cols {
		out = append(out, v.store.col(n))
	}
	return out
}

// lookupColumn resolves a JSON key case-insensitively, as the device does.
func (v *view) lookupColumn(key string) (*column, bool) {
	for _, c := range v.columns() {
		if strings.EqualFold(c.name, key) {
			return c, true
		}
	}
	return nil, false
}

// isIndexKey reports whether key names one of the view's index columns (case-insensitively).
func (v *view) isIndexKey(key string) (int, bool) {
	for i, n := range v.index {
		if strings.EqualFold(n, key) {
			return i, true
		}
	}
	return 0, false
}

var (
	enumDelete     = map[int64]string{1: "other", 2: "delete"}
	enumIPVer      = map[int64]string{1: "ipv4", 2: "ipv6"}
	enumRealState  = map[int64]string{2: "enabled", 3: "disabled", 4: "disabled-with-fastage", 5: "shutdown-connection", 6: "shutdown-persistent-sessions"}
	enumRealType   = map[int64]string{1: "local-server", 2: "remote-server"}
	enumMetric     = map[int64]string{1: "roundRobin", 2: "leastConnections", 3: "minMisses", 4: "hash", 5: "response", 6: "bandwidth", 7: "phash", 8: "svcLeast", 9: "hrw"}
	enumHCLayer    = map[int64]string{1: "icmp", 2: "tcp", 3: "http", 4: "dns", 5: "smtp", 6: "pop3", 7: "nntp", 8: "ftp", 9: "imap", 10: "radius", 11: "sslh", 12: "script", 13: "udpdns", 14: "arp"}
	enumMemberSt   = map[int64]string{1: "enabled", 2: "disabled", 3: "shutdown-connection", 4: "shutdown-persistent-sessions"}
	enumVirtState  = map[int64]string{2: "enabled", 3: "disabled"}
	enumUDPBalance = map[int64]string{2: "udp", 3: "tcp", 4: "stateless", 5: "tcpAndUdp", 6: "sctp"}
	enumDBind      = map[int64]string{1: "enabled", 2: "disabled", 3: "forceproxy"}
	enumPBind      = map[int64]string{2: "clientip", 3: "disabled", 4: "sslid", 5: "cookie"}
	enumSvcStatus  = map[int64]string{1: "up", 2: "down", 3: "adminDown", 4: "warning", 5: "shutdown", 6: "error"}
	enumProxyMode  = map[int64]string{0: "ingress", 1: "egress", 2: "address", 3: "nwclss", 4: "disable"}
	enumPeerState  = map[int64]string{1: "enable", 2: "disable"}
)

// unsupported(2147483647) is accepted by most enumerations.
const enumUnsupported = 2147483647

func init() {
	for _, m := range []map[int64]string{enumRealState, enumRealType, enumMetric, enumHCLayer, enumMemberSt, enumVirtState, enumUDPBalance, enumDBind, enumPBind, enumProxyMode} {
		m[enumUnsupported] = "unsupported"
	}
}

func strCol(name string, min, max int64) column {
	return column{name: name, kind: kindString, min: min, max: max}
}
func intCol(name string, min, max int64, def int64) column {
	return column{name: name, kind: kindInt, min: min, max: max, def: def}
}
func enumCol(name string, e map[int64]string, def int64) column {
	return column{name: name, kind: kindEnum, enum: e, def: def}
}
func deleteCol(name string) column {
	return column{name: name, kind: kindEnum, enum: enumDelete, def: int64(1), delete: true}
}

// Store names.
const (
	stRealServer  = "realServer"
	stRealPort    = "realPort"
	stGroup       = "group"
	stGroupMember = "groupMember"
	stVirtServer  = "virtServer"
	stVirtService = "virtService"
	stPeer        = "peer"
)

var stores = map[string]*storeSchema{
	stRealServer: {
		name:  stRealServer,
		index: []column{strCol("Index", 1, 255)},
		cols: []column{
			{name: "IpAddr", kind: kindIP},
			intCol("Weight", 1, 48, 1),
			intCol("MaxConns", 0, 1000000, 0),
			intCol("TimeOut", 2, 32768, 10),
			// Health-check timing (MIB ranges; defaults: the device's, see the package doc).
			intCol("PingInterval", 0, 600, 2),
			intCol("FailRetry", 0, 63, 4),
			intCol("SuccRetry", 0, 63, 2),
			enumCol("State", enumRealState, 3),
			deleteCol("Delete"),
			enumCol("Type", enumRealType, 1),
			strCol("Name", 0, 255),
			enumCol("IpVer", enumIPVer, 1),
			strCol("Ipv6Addr", 0, 40),
			{name: "NxtRportIdx", kind: kindInt, min: 0, max: 64, readOnly: true},
		},
	},
	stRealPort: {
		name:   stRealPort,
		index:  []column{strCol("Index", 1, 255), intCol("PortIndex", 1, 64, 0)},
		parent: stRealServer,
		cols: []column{
			{name: "RealPort", kind: kindInt, min: 0, max: 65534, valid: func(n int64) bool { return n == 0 || n >= 5 }},
			deleteCol("Delete"),
			{name: "RealPortFreeIdx", kind: kindInt, min: 0, max: 64, readOnly: true},
		},
	},
	stGroup: {
		name:  stGroup,
		index: []column{strCol("Index", 1, 255)},
		cols: []column{
			{name: "AddServer", kind: kindString, min: 1, max: 255, action: true},
			{name: "RemoveServer", kind: kindString, min: 1, max: 255, action: true},
			enumCol("Metric", enumMetric, 1),
			strCol("HealthID", 0, 128),
			enumCol("HealthCheckLayer", enumHCLayer, 1),
			strCol("BackupServer", 0, 255),
			strCol("BackupGroup", 0, 255),
			intCol("Slowstart", 0, 600, 0),
			strCol("Name", 0, 255),
			enumCol("IpVer", enumIPVer, 1),
			deleteCol("Delete"),
		},
	},
	stGroupMember: {
		name:   stGroupMember,
		index:  []column{strCol("RealServGroupIndex", 1, 255), strCol("ServIndex", 1, 255)},
		parent: stGroup,
		cols:   []column{enumCol("State", enumMemberSt, 1)},
	},
	stVirtServer: {
		name:  stVirtServer,
		index: []column{strCol("VirtServerIndex", 1, 255)},
		cols: []column{
			{name: "VirtServerIpAddress", kind: kindIP},
			enumCol("VirtServerState", enumVirtState, 3),
			strCol("VirtServerVname", 0, 128), // MIB SIZE(0..128), shorter than the other names
			enumCol("VirtServerIpVer", enumIPVer, 1),
			strCol("VirtServerIpv6Addr", 0, 40),
			deleteCol("VirtServerDelete"),
			{name: "VirtServerFreeServiceIdx", kind: kindInt, min: 0, max: 8, readOnly: true},
		},
	},
	stVirtService: {
		name:   stVirtService,
		index:  []column{strCol("ServIndex", 1, 255), intCol("Index", 1, 8, 0)},
		parent: stVirtServer,
		cols: []column{
			{name: "VirtPort", kind: kindInt, min: 1, max: 65534, valid: func(n int64) bool { return n == 1 || n >= 9 }},
			{name: "RealPort", kind: kindInt, min: 0, max: 65534, valid: func(n int64) bool { return n <= 1 || n >= 5 }},
			enumCol("UDPBalance", enumUDPBalance, 3),
			enumCol("DBind", enumDBind, 2),
			enumCol("PBind", enumPBind, 3),
			{name: "Status", kind: kindEnum, enum: enumSvcStatus, def: int64(2), readOnly: true},
			deleteCol("Delete"),
			// Seventh part.
			strCol("RealGroup", 0, 255),
			intCol("PersistentTimeOut", 0, 1440, 10),
			enumCol("ProxyIpMode", enumProxyMode, 0),
			{name: "ProxyIpAddr", kind: kindIP},
			{name: "ProxyIpMask", kind: kindIP},
			strCol("ProxyIpv6Addr", 0, 40),
			intCol("ProxyIpv6Prefix", 0, 128, 0),
		},
	},
	stPeer: {
		name:  stPeer,
		index: []column{intCol("Index", 1, 4, 0)},
		cols: []column{
			{name: "IpAddr", kind: kindIP},
			enumCol("State", enumPeerState, 2),
			deleteCol("Delete"),
			strCol("Ipv6Addr", 0, 40),
			enumCol("IpVersion", enumIPVer, 1),
		},
	},
}

var virtServiceMainCols = []string{"VirtPort", "RealPort", "UDPBalance", "DBind", "PBind", "Status", "Delete"}
var virtServiceSeventhCols = []string{"RealGroup", "PersistentTimeOut", "ProxyIpMode", "ProxyIpAddr", "ProxyIpMask", "ProxyIpv6Addr", "ProxyIpv6Prefix"}

// views lists every configuration table the simulator serves, by its REST name. CurCfg twins are
// added by init.
var views = map[string]*view{}

func addView(v *view) { views[v.name] = v }

func init() {
	newViews := []*view{
		{name: "SlbNewCfgEnhRealServerTable", store: stores[stRealServer], index: []string{"Index"}},
		{name: "SlbNewCfgEnhRealServPortTable", store: stores[stRealPort], index: []string{"Index", "PortIndex"}},
		{name: "SlbNewCfgEnhGroupTable", store: stores[stGroup], index: []string{"Index"}},
		{name: "SlbNewCfgEnhGroupRealServerTable", store: stores[stGroupMember], index: []string{"RealServGroupIndex", "ServIndex"}},
		{name: "SlbNewCfgEnhVirtServerTable", store: stores[stVirtServer], index: []string{"VirtServerIndex"}},
		{name: "SlbNewCfgEnhVirtServicesTable", store: stores[stVirtService], index: []string{"ServIndex", "Index"}, cols: virtServiceMainCols},
		{name: "SlbNewCfgEnhVirtServicesSeventhPartTable", store: stores[stVirtService], index: []string{"ServSeventhPartIndex", "SeventhPartIndex"}, cols: virtServiceSeventhCols, continuation: true},
		{name: "SlbNewCfgPeerTable", store: stores[stPeer], index: []string{"Index"}},
	}
	for _, v := range newViews {
		addView(v)
		cur := *v
		cur.name = strings.Replace(v.name, "NewCfg", "CurCfg", 1)
		cur.src = srcCur
		cur.readOnly = true
		addView(&cur)
	}
	// The membership read table used by zdnscloud/elb-controller: pending configuration, index only.
	addView(&view{name: "SlbEnhGroupRealServersTable", store: stores[stGroupMember], index: []string{"RealServerGroupIndex", "Index"}, readOnly: true, membershipOnly: true})
}

// wrongInput is the 406 body of a per-column validation failure.
func wrongInput(table, col string, v any) *apiError {
	return &apiError{status: 406, testErr: fmt.Sprintf("Wrong input %v.", v), mibName: table + "," + col}
}
