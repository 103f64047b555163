// Package bfeconf defines the JSON data files that BFE loads for routing and load balancing, renders
// them deterministically, decodes them strictly, and validates them the way BFE does plus the
// cross-file invariants BFE does not check.
//
// BFE itself is not importable (it is not on the Go module proxy), so these are this project's own
// structs. Field names and shapes follow BFE's formats, which are identical in v1.6 through v1.8.
package bfeconf

// Well-known names inside BFE's configuration.
const (
	// AdvancedMode as a basic rule's ClusterName defers the decision to the product rules.
	AdvancedMode = "ADVANCED_MODE"
	// Blackhole is GSLB's built-in sub-cluster that drops requests; it is listed with weight 0.
	Blackhole = "GSLB_BLACKHOLE"
	// NonExistentHashHeader names a header no client sends: with HashStrategy 0 the GSLB hash key is then
	// empty and BFE picks a sub-cluster by weighted random per request instead of per client IP.
	NonExistentHashHeader = "bfe-non-existence"
)

// Hash strategies of GslbBasic.HashConf.
const (
	HashClientID      = 0
	HashClientIP      = 1
	HashClientIDOrIP  = 2
	HashRequestURI    = 3
	maxHashStrategyID = HashRequestURI
)

// HostRuleConf is server_data_conf/host_rule.data.
type HostRuleConf struct {
	Version        string              `json:"Version"`
	DefaultProduct *string             `json:"DefaultProduct"`
	Hosts          map[string][]string `json:"Hosts"`
	HostTags       map[string][]string `json:"HostTags"`
}

// VipRuleConf is server_data_conf/vip_rule.data.
type VipRuleConf struct {
	Version string              `json:"Version"`
	Vips    map[string][]string `json:"Vips"`
}

// BasicRule is one entry of RouteRuleConf.BasicRule: host and path patterns mapped to a cluster.
type BasicRule struct {
	Hostname    []string `json:"Hostname,omitempty"`
	Path        []string `json:"Path,omitempty"`
	ClusterName string   `json:"ClusterName"`
}

// ProductRule is one entry of RouteRuleConf.ProductRule (an "advanced" rule): a condition expression.
type ProductRule struct {
	Cond        string `json:"Cond"`
	ClusterName string `json:"ClusterName"`
}

// RouteRuleConf is server_data_conf/route_rule.data.
type RouteRuleConf struct {
	Version     string                   `json:"Version"`
	BasicRule   map[string][]BasicRule   `json:"BasicRule"`
	ProductRule map[string][]ProductRule `json:"ProductRule"`
}

// BackendConf is the backend connection block of a cluster.
type BackendConf struct {
	Protocol              string `json:"Protocol"`
	TimeoutConnSrv        int    `json:"TimeoutConnSrv"`
	TimeoutResponseHeader int    `json:"TimeoutResponseHeader"`
	MaxIdleConnsPerHost   int    `json:"MaxIdleConnsPerHost"`
	RetryLevel            int    `json:"RetryLevel"`
}

// CheckConf is the active health check of a cluster (run only after FailNum consecutive failures).
type CheckConf struct {
	Schem         string `json:"Schem"`
	Uri           string `json:"Uri,omitempty"`
	Host          string `json:"Host,omitempty"`
	StatusCode    int    `json:"StatusCode,omitempty"`
	FailNum       int    `json:"FailNum"`
	CheckInterval int    `json:"CheckInterval"`
}

// HashConf selects the GSLB hash key.
type HashConf struct {
	HashStrategy  int    `json:"HashStrategy"`
	HashHeader    string `json:"HashHeader,omitempty"`
	SessionSticky bool   `json:"SessionSticky"`
}

// GslbBasic configures retries and balancing of a cluster.
type GslbBasic struct {
	CrossRetry  int      `json:"CrossRetry"`
	RetryMax    int      `json:"RetryMax"`
	BalanceMode string   `json:"BalanceMode"`
	HashConf    HashConf `json:"HashConf"`
}

// ClusterBasic holds client-side timeouts and buffering of a cluster.
type ClusterBasic struct {
	TimeoutReadClient      int  `json:"TimeoutReadClient"`
	TimeoutWriteClient     int  `json:"TimeoutWriteClient"`
	TimeoutReadClientAgain int  `json:"TimeoutReadClientAgain"`
	ReqWriteBufferSize     int  `json:"ReqWriteBufferSize"`
	ReqFlushInterval       int  `json:"ReqFlushInterval"`
	ResFlushInterval       int  `json:"ResFlushInterval"`
	CancelOnClientClose    bool `json:"CancelOnClientClose"`
}

// Cluster is the per-cluster settings entry of cluster_conf.data. Every block is written in full so
// that no setting depends on BFE's defaults (the default HashStrategy, client IP, breaks weighted
// sub-cluster splits).
type Cluster struct {
	BackendConf  BackendConf  `json:"BackendConf"`
	CheckConf    CheckConf    `json:"CheckConf"`
	GslbBasic    GslbBasic    `json:"GslbBasic"`
	ClusterBasic ClusterBasic `json:"ClusterBasic"`
}

// ClusterConf is server_data_conf/cluster_conf.data.
type ClusterConf struct {
	Version string             `json:"Version"`
	Config  map[string]Cluster `json:"Config"`
}

// NameConf is server_data_conf/name_conf.data (naming service; unused, written empty because BFE
// needs the file at startup).
type NameConf struct {
	Version string            `json:"Version"`
	Config  map[string]string `json:"Config"`
}

// Instance is one backend of a sub-cluster in cluster_table.data.
type Instance struct {
	Name   string `json:"Name"`
	Addr   string `json:"Addr"`
	Port   int    `json:"Port"`
	Weight int    `json:"Weight"`
}

// ClusterTableConf is cluster_conf/cluster_table.data: cluster → sub-cluster → instances.
type ClusterTableConf struct {
	Version string                           `json:"Version"`
	Config  map[string]map[string][]Instance `json:"Config"`
}

// GslbConf is cluster_conf/gslb.data: cluster → sub-cluster → weight. It has no Version; Ts and
// Hostname play that role and are both required.
type GslbConf struct {
	Clusters map[string]map[string]int `json:"Clusters"`
	Hostname string                    `json:"Hostname"`
	Ts       string                    `json:"Ts"`
}
