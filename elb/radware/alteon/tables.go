package alteon

// Table names (exact device spellings).
const (
	TableRealServer       = "SlbNewCfgEnhRealServerTable"
	TableRealServerPort   = "SlbNewCfgEnhRealServPortTable"
	TableGroup            = "SlbNewCfgEnhGroupTable"
	TableGroupRealServer  = "SlbNewCfgEnhGroupRealServerTable"
	TableVirtServer       = "SlbNewCfgEnhVirtServerTable"
	TableVirtService      = "SlbNewCfgEnhVirtServicesTable"
	TableVirtServiceGroup = "SlbNewCfgEnhVirtServicesSeventhPartTable"
	TableApplyErrors      = "AgApplyTable"
	TableSaveErrors       = "AgSaveTable"
)

// indexKeys lists each table's index columns in INDEX order, as the rows spell them.
var indexKeys = map[string][]string{
	TableRealServer:       {"Index"},
	TableRealServerPort:   {"Index", "PortIndex"},
	TableGroup:            {"Index"},
	TableGroupRealServer:  {"RealServGroupIndex", "ServIndex"},
	TableVirtServer:       {"VirtServerIndex"},
	TableVirtService:      {"ServIndex", "Index"},
	TableVirtServiceGroup: {"ServSeventhPartIndex", "SeventhPartIndex"},
}

// children lists the tables whose rows the device deletes together with a parent row.
var children = map[string][]string{
	TableRealServer: {TableRealServerPort},
	TableGroup:      {TableGroupRealServer},
	TableVirtServer: {TableVirtService, TableVirtServiceGroup},
}

// RealServerState is SlbNewCfgEnhRealServerTable State.
type RealServerState int

// Real server states.
const (
	RealServerEnabled             RealServerState = 2
	RealServerDisabled            RealServerState = 3
	RealServerDisabledWithFastAge RealServerState = 4
	RealServerShutdownConnection  RealServerState = 5
	RealServerShutdownPersistent  RealServerState = 6
)

// MemberState is SlbNewCfgEnhGroupRealServerTable State; its numbering differs from
// RealServerState.
type MemberState int

// Group membership states.
const (
	MemberEnabled            MemberState = 1
	MemberDisabled           MemberState = 2
	MemberShutdownConnection MemberState = 3 // drain: no new connections, existing ones continue
	MemberShutdownPersistent MemberState = 4
)

// Metric is a group's load-balancing metric.
type Metric int

// Group metrics.
const (
	MetricRoundRobin       Metric = 1
	MetricLeastConnections Metric = 2
	MetricMinMisses        Metric = 3
	MetricHash             Metric = 4
	MetricResponse         Metric = 5
	MetricBandwidth        Metric = 6
	MetricPHash            Metric = 7
	MetricSvcLeast         Metric = 8
	MetricHRW              Metric = 9
)

// Balance is a virtual service's UDPBalance (its transport).
type Balance int

// Virtual service transports.
const (
	BalanceUDP       Balance = 2
	BalanceTCP       Balance = 3
	BalanceStateless Balance = 4
	BalanceTCPAndUDP Balance = 5
	BalanceSCTP      Balance = 6
)

// Virtual server states.
const (
	virtEnabled  = 2
	virtDisabled = 3
)

// Real server types.
const realServerLocal = 1

// RealServer is a row of SlbNewCfgEnhRealServerTable (the columns lbfed manages).
type RealServer struct {
	Index  string
	IP     string
	Weight int // 1..48
	State  RealServerState
	Name   string
	// Health is the server's health-check timing; zero fields are not written (the device keeps
	// what it has, its defaults for a new server).
	Health HealthTiming
}

// HealthTiming is a real server's health-check timing: PingInterval (seconds between checks,
// 0..600, 0 disables), FailRetry (consecutive failed checks before the server is failed, 0..63)
// and SuccRetry (consecutive successful checks before it is restored, 0..63).
type HealthTiming struct {
	Interval int // PingInterval
	Retries  int // FailRetry
	Restore  int // SuccRetry
}

func (h HealthTiming) fields(into map[string]any) {
	for k, v := range map[string]int{"PingInterval": h.Interval, "FailRetry": h.Retries, "SuccRetry": h.Restore} {
		if v > 0 {
			into[k] = v
		}
	}
}

func (r RealServer) fields() map[string]any {
	f := map[string]any{"IpAddr": r.IP, "Weight": r.Weight, "State": int(r.State), "Type": realServerLocal, "Name": r.Name}
	r.Health.fields(f)
	return f
}

func realServerFromRow(r Row) RealServer {
	return RealServer{Index: r.Str("Index"), IP: r.Str("IpAddr"), Weight: r.Int("Weight"), State: RealServerState(r.Int("State")), Name: r.Str("Name"),
		Health: HealthTiming{Interval: r.Int("PingInterval"), Retries: r.Int("FailRetry"), Restore: r.Int("SuccRetry")}}
}

// Group is a row of SlbNewCfgEnhGroupTable.
type Group struct {
	Index    string
	Metric   Metric
	HealthID string // advanced health check id, e.g. "tcp" or "udp"; empty for none
	Name     string
}

func (g Group) fields() map[string]any {
	return map[string]any{"Metric": int(g.Metric), "HealthID": g.HealthID, "Name": g.Name}
}

func groupFromRow(r Row) Group {
	return Group{Index: r.Str("Index"), Metric: Metric(r.Int("Metric")), HealthID: r.Str("HealthID"), Name: r.Str("Name")}
}

// VirtualServer is a row of SlbNewCfgEnhVirtServerTable.
type VirtualServer struct {
	Index   string
	IP      string
	Enabled bool
	Name    string // VirtServerVname
}

func (v VirtualServer) fields() map[string]any {
	st := virtDisabled
	if v.Enabled {
		st = virtEnabled
	}
	return map[string]any{"VirtServerIpAddress": v.IP, "VirtServerState": st, "VirtServerVname": v.Name}
}

func virtualServerFromRow(r Row) VirtualServer {
	return VirtualServer{Index: r.Str("VirtServerIndex"), IP: r.Str("VirtServerIpAddress"), Enabled: r.Int("VirtServerState") == virtEnabled, Name: r.Str("VirtServerVname")}
}

// VirtualService is a row of SlbNewCfgEnhVirtServicesTable together with its group binding in
// SlbNewCfgEnhVirtServicesSeventhPartTable.
type VirtualService struct {
	Server   string // virtual server index
	Index    int    // service slot 1..8
	VirtPort int
	// RealPort 0 means "multiple real ports": each real server's own port (RealServerPort) is used.
	RealPort int
	Balance  Balance
	DBind    int // enabled(1), disabled(2), forceproxy(3)
	PBind    int // clientip(2), disabled(3), sslid(4), cookie(5)

	Group             string
	PersistentTimeout int
	ProxyIPMode       int // ingress(0), egress(1), address(2), nwclss(3), disable(4)
}

func (s VirtualService) mainFields() map[string]any {
	return map[string]any{"VirtPort": s.VirtPort, "RealPort": s.RealPort, "UDPBalance": int(s.Balance), "DBind": s.DBind, "PBind": s.PBind}
}

func (s VirtualService) groupFields() map[string]any {
	return map[string]any{"RealGroup": s.Group, "PersistentTimeOut": s.PersistentTimeout, "ProxyIpMode": s.ProxyIPMode}
}
