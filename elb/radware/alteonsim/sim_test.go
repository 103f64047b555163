package alteonsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
)

// client is a raw REST client for tests: no retries, no leniency.
type client struct {
	t    *testing.T
	base string
	user string
	pass string
	hc   *http.Client
}

func newClient(t *testing.T, base string) *client {
	return &client{t: t, base: base, user: "admin", pass: "admin", hc: &http.Client{Timeout: 5 * time.Second}}
}

// do sends a request; path is relative to /config. It returns the status and the raw body.
func (c *client) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+"/config"+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// json sends a request and decodes the answer as a JSON object.
func (c *client) json(method, path, body string) (int, map[string]any) {
	c.t.Helper()
	st, b := c.do(method, path, body)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		c.t.Fatalf("%s %s: answer %q is not JSON: %v", method, path, b, err)
	}
	return st, m
}

// ok asserts {"status":"ok"} with 200.
func (c *client) ok(method, path, body string) {
	c.t.Helper()
	st, m := c.json(method, path, body)
	if st != 200 || m["status"] != "ok" {
		c.t.Fatalf("%s %s %s: got %d %v, want 200 ok", method, path, body, st, m)
	}
}

// rows GETs a table path and returns its rows.
func (c *client) rows(path string) []map[string]any {
	c.t.Helper()
	st, m := c.json("GET", path, "")
	if st != 200 {
		c.t.Fatalf("GET %s: %d %v", path, st, m)
	}
	table := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 2)[0]
	table = strings.SplitN(table, "?", 2)[0]
	list, ok := m[table].([]any)
	if !ok {
		c.t.Fatalf("GET %s: no list under %q: %v", path, table, m)
	}
	out := make([]map[string]any, len(list))
	for i, r := range list {
		out[i] = r.(map[string]any)
	}
	return out
}

func (c *client) scalar(name string) string {
	c.t.Helper()
	_, m := c.json("GET", "?prop="+name, "")
	return fmt.Sprint(m[name])
}

// waitApply polls agApplyConfig until it leaves inprogress and returns the final state.
func (c *client) waitState(name string) string {
	c.t.Helper()
	var v string
	NewWithT(c.t).Eventually(func() string { v = c.scalar(name); return v }).WithTimeout(5*time.Second).WithPolling(5*time.Millisecond).
		ShouldNot(Equal("3"), "%s stays in progress", name)
	return v
}

func (c *client) apply() string {
	c.t.Helper()
	c.ok("POST", "?action=apply", "")
	return c.waitState("agApplyConfig")
}

func startDevice(t *testing.T, opts Options) (*Device, *client) {
	t.Helper()
	d := New(opts)
	url, err := d.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, newClient(t, url)
}

func startPair(t *testing.T, a, b Options) (*Pair, *client, *client) {
	t.Helper()
	p := NewPair(a, b)
	ua, ub, err := p.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p, newClient(t, ua), newClient(t, ub)
}

// seedService writes one complete L4 service (two real servers, a group, a virtual service).
func seedService(c *client, vip string, port int, rsPorts map[string]string) {
	for rs, addr := range rsPorts {
		host, p, _ := strings.Cut(addr, ":")
		c.ok("POST", "/SlbNewCfgEnhRealServerTable/"+rs, fmt.Sprintf(`{"IpAddr":%q,"State":2,"Type":1}`, host))
		c.ok("POST", "/SlbNewCfgEnhRealServPortTable/"+rs+"/1", fmt.Sprintf(`{"RealPort":%s}`, p))
	}
	c.ok("POST", "/SlbNewCfgEnhGroupTable/g1", `{"Metric":1,"HealthID":"tcp"}`)
	for rs := range rsPorts {
		c.ok("PUT", "/SlbNewCfgEnhGroupTable/g1", fmt.Sprintf(`{"AddServer":%q}`, rs))
	}
	c.ok("POST", "/SlbNewCfgEnhVirtServerTable/v1", fmt.Sprintf(`{"VirtServerIpAddress":%q,"VirtServerState":2}`, vip))
	c.ok("POST", "/SlbNewCfgEnhVirtServicesTable/v1/1", fmt.Sprintf(`{"VirtPort":%d,"RealPort":0,"UDPBalance":3,"DBind":2,"PBind":2}`, port))
	c.ok("PUT", "/SlbNewCfgEnhVirtServicesSeventhPartTable/v1/1", `{"RealGroup":"g1","PersistentTimeOut":10,"ProxyIpMode":1}`)
}

func TestTablesCRUD(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{})

	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs-a", `{"IpAddr":"10.0.0.11","State":2,"Type":1}`)
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs-a", `{"Weight":7}`)           // PUT updates
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs-b", `{"IpAddr":"10.0.0.12"}`) // PUT creates
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs-b", `{"Weight":3}`)          // POST on an existing row updates
	c.ok("POST", "/SlbNewCfgEnhRealServPortTable/rs-a/1", `{"RealPort":30080}`)

	rows := c.rows("/SlbNewCfgEnhRealServerTable/rs-a")
	g.Expect(rows).To(HaveLen(1), "a single row is still list-wrapped")
	g.Expect(rows[0]).To(HaveKeyWithValue("Index", "rs-a"))
	g.Expect(rows[0]).To(HaveKeyWithValue("IpAddr", "10.0.0.11"))
	g.Expect(rows[0]).To(HaveKeyWithValue("Weight", json.Number("7")))
	g.Expect(rows[0]).To(HaveKeyWithValue("State", json.Number("2")))
	g.Expect(rows[0]).To(HaveKeyWithValue("NxtRportIdx", json.Number("2")))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable/rs-b")[0]).To(HaveKeyWithValue("Weight", json.Number("3")))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable/missing")).To(BeEmpty(), "a missing row is an empty list")
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(2))

	port := c.rows("/SlbNewCfgEnhRealServPortTable/rs-a/1")
	g.Expect(port).To(HaveLen(1))
	g.Expect(port[0]).To(And(HaveKeyWithValue("Index", "rs-a"), HaveKeyWithValue("PortIndex", json.Number("1")),
		HaveKeyWithValue("RealPort", json.Number("30080")), HaveKeyWithValue("RealPortFreeIdx", json.Number("2"))))
	g.Expect(c.rows("/SlbNewCfgEnhRealServPortTable/rs-a")).To(HaveLen(1), "one index segment lists the server's ports")

	// A real port needs its real server.
	st, m := c.json("POST", "/SlbNewCfgEnhRealServPortTable/nope/1", `{"RealPort":80}`)
	g.Expect(st).To(Equal(406))
	g.Expect(m["testErr"]).To(ContainSubstring("does not exist"))

	// DELETE, then DELETE again: non-2xx with testErr "not exist".
	c.ok("DELETE", "/SlbNewCfgEnhRealServerTable/rs-b", "")
	st, m = c.json("DELETE", "/SlbNewCfgEnhRealServerTable/rs-b", "")
	g.Expect(st).To(Equal(404))
	g.Expect(m["status"]).To(Equal("err"))
	g.Expect(m["testErr"]).To(ContainSubstring("not exist"))

	// The Delete column deletes like DELETE; deleting a real server removes its ports.
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs-a", `{"Delete":2}`)
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(BeEmpty())
	g.Expect(c.rows("/SlbNewCfgEnhRealServPortTable")).To(BeEmpty())

	// Virtual server, services, seventh part, derived free slot.
	c.ok("POST", "/SlbNewCfgEnhVirtServerTable/vip1", `{"VirtServerIpAddress":"192.0.2.10","VirtServerState":2}`)
	c.ok("POST", "/SlbNewCfgEnhVirtServicesTable/vip1/1", `{"VirtPort":80,"RealPort":30080,"UDPBalance":3,"DBind":2,"PBind":2}`)
	c.ok("PUT", "/SlbNewCfgEnhVirtServicesSeventhPartTable/vip1/1", `{"RealGroup":"g-web","PersistentTimeOut":10,"ProxyIpMode":1}`)
	g.Expect(c.rows("/SlbNewCfgEnhVirtServerTable/vip1")[0]).To(HaveKeyWithValue("VirtServerFreeServiceIdx", json.Number("2")))
	svc := c.rows("/SlbNewCfgEnhVirtServicesTable/vip1/1")[0]
	g.Expect(svc).To(And(HaveKeyWithValue("ServIndex", "vip1"), HaveKeyWithValue("Index", json.Number("1")),
		HaveKeyWithValue("VirtPort", json.Number("80")), HaveKeyWithValue("Status", json.Number("2"))))
	g.Expect(svc).NotTo(HaveKey("RealGroup"), "seventh-part columns live in the seventh-part table")
	seventh := c.rows("/SlbNewCfgEnhVirtServicesSeventhPartTable/vip1/1")[0]
	g.Expect(seventh).To(And(HaveKeyWithValue("ServSeventhPartIndex", "vip1"), HaveKeyWithValue("SeventhPartIndex", json.Number("1")),
		HaveKeyWithValue("RealGroup", "g-web"), HaveKeyWithValue("ProxyIpMode", json.Number("1"))))
	st, _ = c.json("PUT", "/SlbNewCfgEnhVirtServicesSeventhPartTable/vip1/2", `{"RealGroup":"g"}`)
	g.Expect(st).To(Equal(406), "continuation tables cannot create a service")
	st, _ = c.json("POST", "/SlbNewCfgEnhVirtServicesTable/vip1/9", `{"VirtPort":81}`)
	g.Expect(st).To(Equal(406), "service slots are 1..8")
	c.ok("DELETE", "/SlbNewCfgEnhVirtServerTable/vip1", "")
	g.Expect(c.rows("/SlbNewCfgEnhVirtServicesTable")).To(BeEmpty(), "deleting a virtual server removes its services")

	// Peer table (integer index).
	c.ok("PUT", "/SlbNewCfgPeerTable/1", `{"IpAddr":"192.0.2.2","State":1}`)
	g.Expect(c.rows("/SlbNewCfgPeerTable/1")[0]).To(HaveKeyWithValue("Index", json.Number("1")))

	// Read-only twins and unknown tables.
	st, _ = c.json("PUT", "/SlbCurCfgEnhRealServerTable/x", `{}`)
	g.Expect(st).To(Equal(405))
	st, m = c.json("GET", "/SlbNewCfgEnhVirtSeviceTable", "")
	g.Expect(st).To(Equal(404), "there is no …VirtSeviceTable")
	g.Expect(m["status"]).To(Equal("err"))
}

func TestGroupMembership(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{})
	for _, rs := range []string{"node-a", "node-b"} {
		c.ok("POST", "/SlbNewCfgEnhRealServerTable/"+rs, `{"IpAddr":"10.0.0.1","State":2}`)
	}
	c.ok("POST", "/SlbNewCfgEnhGroupTable/g-web", `{"Metric":1,"HealthID":"tcp"}`)
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g-web", `{"AddServer":"node-a"}`)
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g-web", `{"addserver":"node-b"}`)
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g-web", `{"AddServer":"node-b"}`) // adding twice is harmless

	grp := c.rows("/SlbNewCfgEnhGroupTable/g-web")[0]
	g.Expect(grp).To(And(HaveKeyWithValue("AddServer", json.Number("0")), HaveKeyWithValue("RemoveServer", json.Number("0"))),
		"action columns read back 0")
	members := c.rows("/SlbNewCfgEnhGroupRealServerTable/g-web")
	g.Expect(members).To(HaveLen(2))
	g.Expect(members[0]).To(And(HaveKeyWithValue("RealServGroupIndex", "g-web"), HaveKeyWithValue("ServIndex", "node-a"), HaveKeyWithValue("State", json.Number("1"))))
	legacy := c.rows("/SlbEnhGroupRealServersTable/g-web")
	g.Expect(legacy).To(ConsistOf(
		map[string]any{"RealServerGroupIndex": "g-web", "Index": "node-a"},
		map[string]any{"RealServerGroupIndex": "g-web", "Index": "node-b"}))

	// Drain through the membership row (its own State numbering), filter by column.
	c.ok("PUT", "/SlbNewCfgEnhGroupRealServerTable/g-web/node-b", `{"State":3}`)
	draining := c.rows("/SlbNewCfgEnhGroupRealServerTable?filter=State:3")
	g.Expect(draining).To(HaveLen(1))
	g.Expect(draining[0]).To(HaveKeyWithValue("ServIndex", "node-b"))
	st, m := c.json("PUT", "/SlbNewCfgEnhGroupRealServerTable/g-web/node-b", `{"State":5}`)
	g.Expect(st).To(Equal(406), "membership State is 1..4")
	g.Expect(m["mibName"]).To(Equal("SlbNewCfgEnhGroupRealServerTable,State"))
	st, _ = c.json("PUT", "/SlbNewCfgEnhGroupRealServerTable/g-web/node-x", `{"State":1}`)
	g.Expect(st).To(Equal(406), "a membership row exists only for members")

	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g-web", `{"RemoveServer":"node-b"}`)
	g.Expect(c.rows("/SlbEnhGroupRealServersTable/g-web")).To(HaveLen(1))
	st, m = c.json("PUT", "/SlbNewCfgEnhGroupTable/g-web", `{"RemoveServer":"node-b"}`)
	g.Expect(st).To(Equal(406))
	g.Expect(m["testErr"]).To(ContainSubstring("not a member"))

	c.ok("DELETE", "/SlbNewCfgEnhGroupTable/g-web", "")
	g.Expect(c.rows("/SlbNewCfgEnhGroupRealServerTable")).To(BeEmpty(), "deleting a group removes its memberships")
}

func TestInputLeniencyAndValidation(t *testing.T) {
	_, c := startDevice(t, Options{})
	c.ok("POST", "/SlbNewCfgEnhGroupTable/g", `{}`)
	tests := []struct {
		name    string
		path    string
		body    string
		status  int
		mibName string
	}{
		{"lower-case keys", "/SlbNewCfgEnhRealServerTable/r1", `{"ipaddr":"10.1.1.1","state":2,"WEIGHT":5}`, 200, ""},
		{"numbers as strings and trailing comma", "/SlbNewCfgEnhRealServerTable/r2", `{"IpAddr":"10.1.1.2","State":"2","Weight":"4",}`, 200, ""},
		{"pretty-printed body", "/SlbNewCfgEnhRealServerTable/r3", "{\n  \"IpAddr\": \"10.1.1.3\",\n  \"State\": 2\n}", 200, ""},
		{"index key repeated in body", "/SlbNewCfgEnhRealServerTable/r4", `{"Index":"r4","IpAddr":"10.1.1.4"}`, 200, ""},
		{"index key mismatch", "/SlbNewCfgEnhRealServerTable/r5", `{"Index":"other"}`, 406, "SlbNewCfgEnhRealServerTable,Index"},
		{"weight out of range", "/SlbNewCfgEnhRealServerTable/r6", `{"Weight":49}`, 406, "SlbNewCfgEnhRealServerTable,Weight"},
		{"unknown enum value", "/SlbNewCfgEnhRealServerTable/r6", `{"State":1}`, 406, "SlbNewCfgEnhRealServerTable,State"},
		{"unsupported enum value is accepted", "/SlbNewCfgEnhRealServerTable/r7", `{"Type":2147483647}`, 200, ""},
		{"bad IP", "/SlbNewCfgEnhRealServerTable/r6", `{"IpAddr":"10.0.0.300"}`, 406, "SlbNewCfgEnhRealServerTable,IpAddr"},
		{"read-only column", "/SlbNewCfgEnhRealServerTable/r6", `{"NxtRportIdx":3}`, 406, "SlbNewCfgEnhRealServerTable,NxtRportIdx"},
		{"unknown column", "/SlbNewCfgEnhRealServerTable/r6", `{"Colour":"red"}`, 406, "SlbNewCfgEnhRealServerTable,Colour"},
		{"metric enum", "/SlbNewCfgEnhGroupTable/g", `{"Metric":10}`, 406, "SlbNewCfgEnhGroupTable,Metric"},
		{"virt port 2..8 invalid", "/SlbNewCfgEnhVirtServerTable/v", `{"VirtServerIpAddress":"192.0.2.1"}`, 200, ""},
		{"virt port range", "/SlbNewCfgEnhVirtServicesTable/v/1", `{"VirtPort":5}`, 406, "SlbNewCfgEnhVirtServicesTable,VirtPort"},
		{"UDPBalance enum", "/SlbNewCfgEnhVirtServicesTable/v/1", `{"VirtPort":80,"UDPBalance":1}`, 406, "SlbNewCfgEnhVirtServicesTable,UDPBalance"},
		{"real port 2..4 invalid", "/SlbNewCfgEnhVirtServicesTable/v/1", `{"VirtPort":80,"RealPort":3}`, 406, "SlbNewCfgEnhVirtServicesTable,RealPort"},
		{"real port 0 accepted", "/SlbNewCfgEnhVirtServicesTable/v/1", `{"VirtPort":80,"RealPort":0}`, 200, ""},
		{"int index must be numeric", "/SlbNewCfgEnhVirtServicesTable/v/x", `{}`, 406, "SlbNewCfgEnhVirtServicesTable,Index"},
		// Name limits (MIB SIZE): Vname 0..128, group and real server Name 0..255, indexes 1..255.
		{"virtual server name of 128", "/SlbNewCfgEnhVirtServerTable/v", `{"VirtServerVname":"` + strings.Repeat("n", 128) + `"}`, 200, ""},
		{"virtual server name of 129", "/SlbNewCfgEnhVirtServerTable/v", `{"VirtServerVname":"` + strings.Repeat("n", 129) + `"}`, 406, "SlbNewCfgEnhVirtServerTable,VirtServerVname"},
		{"group name of 255", "/SlbNewCfgEnhGroupTable/g", `{"Name":"` + strings.Repeat("n", 255) + `"}`, 200, ""},
		{"group name of 256", "/SlbNewCfgEnhGroupTable/g", `{"Name":"` + strings.Repeat("n", 256) + `"}`, 406, "SlbNewCfgEnhGroupTable,Name"},
		{"real server name of 256", "/SlbNewCfgEnhRealServerTable/r6", `{"Name":"` + strings.Repeat("n", 256) + `"}`, 406, "SlbNewCfgEnhRealServerTable,Name"},
		{"index of 256", "/SlbNewCfgEnhRealServerTable/" + strings.Repeat("i", 256), `{}`, 406, "SlbNewCfgEnhRealServerTable,Index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c.t = t
			st, m := c.json("PUT", tt.path, tt.body)
			g.Expect(st).To(Equal(tt.status), "answer %v", m)
			if tt.status == 200 {
				g.Expect(m).To(Equal(map[string]any{"status": "ok"}))
				return
			}
			g.Expect(m["status"]).To(Equal("err"))
			g.Expect(m["testErr"]).To(ContainSubstring(""))
			g.Expect(m["mibName"]).To(Equal(tt.mibName))
		})
	}
	c.t = t
	// A rejected write changes nothing (the whole body is validated first).
	NewWithT(t).Expect(c.rows("/SlbNewCfgEnhRealServerTable/r6")).To(BeEmpty())
	NewWithT(t).Expect(c.rows("/SlbNewCfgEnhRealServerTable/r1")[0]).To(HaveKeyWithValue("Weight", json.Number("5")))
}

func TestListQueryParameters(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{DefaultPageSize: 3})
	for i := 1; i <= 7; i++ {
		c.ok("POST", fmt.Sprintf("/SlbNewCfgEnhRealServerTable/rs%d", i), fmt.Sprintf(`{"IpAddr":"10.0.0.%d","Weight":%d}`, i, i%2+1))
	}
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(3), "default page size")
	all := c.rows("/SlbNewCfgEnhRealServerTable?count=100")
	g.Expect(all).To(HaveLen(7))
	page := c.rows("/SlbNewCfgEnhRealServerTable?count=2&offset=5")
	g.Expect(page).To(HaveLen(2))
	g.Expect(page[0]["Index"]).To(Equal("rs6"))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable?offset=50")).To(BeEmpty())
	props := c.rows("/SlbNewCfgEnhRealServerTable?count=1&props=Index,ipaddr")
	g.Expect(props[0]).To(Equal(map[string]any{"Index": "rs1", "IpAddr": "10.0.0.1"}))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable?count=100&filter=Weight:2")).To(HaveLen(4))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable?count=100&filter=Weight:2,IpAddr:10.0.0.3")).To(HaveLen(1))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable?count=100&filter=IpAddr:10.0.0")).To(BeEmpty(), "exact by default")
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable?count=100&filter=IpAddr:10.0.0&filtertype=any")).To(HaveLen(7))
}

func TestScalarsAndActions(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{})
	g.Expect(c.scalar("agApplyPending")).To(Equal("3"))
	_, m := c.json("GET", "?prop=agApplyConfig,agSaveConfig,agApplyPending,agSavePending,vrrpInfoHAState", "")
	g.Expect(m).To(Equal(map[string]any{"agApplyConfig": json.Number("2"), "agSaveConfig": json.Number("2"),
		"agApplyPending": json.Number("3"), "agSavePending": json.Number("2"), "vrrpInfoHAState": "master"}))
	st, m := c.json("GET", "?prop=agApplyConfig,noSuchScalar", "")
	g.Expect(st).To(Equal(405), "one unknown scalar fails the whole read")
	g.Expect(m["status"]).To(Equal("err"))
	st, m = c.json("GET", "/haSwitchInfoState", "")
	g.Expect(st).To(Equal(200))
	g.Expect(m).To(Equal(map[string]any{"haSwitchInfoState": "master"}))

	// PUT /config/ with an empty object: the verbatim 405 envelope.
	st, m = c.json("PUT", "/", "{\n}")
	g.Expect(st).To(Equal(405))
	g.Expect(m).To(Equal(map[string]any{"status": "err", "message": "405 Method Not Allowed", "application message": "REST API unknown error"}))

	// Pending → apply (scalar form) → running; save → flash.
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1","State":2}`)
	g.Expect(c.scalar("agApplyPending")).To(Equal("2"))
	g.Expect(c.rows("/SlbCurCfgEnhRealServerTable")).To(BeEmpty())
	_, diff := c.do("GET", "/getdiff", "")
	g.Expect(string(diff)).To(ContainSubstring("+ realServer rs1"))
	c.ok("PUT", "/", `{"agApplyConfig":"1"}`)
	g.Expect(c.scalar("agApplyConfig")).To(Equal("3"), "apply is asynchronous")
	g.Expect(c.waitState("agApplyConfig")).To(Equal("4"))
	g.Expect(c.scalar("agApplyPending")).To(Equal("3"))
	g.Expect(c.rows("/SlbCurCfgEnhRealServerTable")).To(HaveLen(1))
	g.Expect(c.scalar("agSavePending")).To(Equal("1"))
	_, diff = c.do("GET", "/getdiffflash", "")
	g.Expect(string(diff)).To(ContainSubstring("+ realServer rs1"))
	c.ok("POST", "?action=save", "")
	g.Expect(c.waitState("agSaveConfig")).To(Equal("4"))
	g.Expect(c.scalar("agSavePending")).To(Equal("2"))
	g.Expect(d.Snapshot(Flash).RealServers()).To(Equal([]string{"rs1"}))
	c.ok("PUT", "/", `{"agApplyConfig":2}`) // back to idle, as the MIB asks for SNMP
	g.Expect(c.scalar("agApplyConfig")).To(Equal("2"))

	// revert drops unapplied changes only.
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs2", `{"IpAddr":"10.0.0.2"}`)
	c.ok("POST", "?action=revert", "")
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(1))
	g.Expect(c.scalar("agApplyPending")).To(Equal("3"))

	// revertapply drops unapplied and unsaved changes.
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs3", `{"IpAddr":"10.0.0.3"}`)
	g.Expect(c.apply()).To(Equal("4"))
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs4", `{"IpAddr":"10.0.0.4"}`)
	c.ok("POST", "?action=revertapply", "")
	g.Expect(c.rows("/SlbCurCfgEnhRealServerTable")).To(HaveLen(1))
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(1))
	g.Expect(c.scalar("agSavePending")).To(Equal("2"))

	// Revert/revertapply scalar forms, read back other(1).
	c.ok("PUT", "/", `{"agRevert":2}`)
	c.ok("PUT", "/", `{"agRevertApply":"2"}`)
	g.Expect(c.scalar("agRevert")).To(Equal("1"))
	st, m = c.json("PUT", "/", `{"agApplyPending":2}`)
	g.Expect(st).To(Equal(406), "read-only scalar")
	g.Expect(m["mibName"]).To(Equal("agApplyPending"))
	st, _ = c.json("POST", "?action=reboot", "")
	g.Expect(st).To(Equal(400))
}

func TestApplyInProgressAnswers406(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{})
	d.InjectApply(ApplyFault{Hang: true})
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1"}`)
	c.ok("POST", "?action=apply", "")
	for _, req := range [][3]string{
		{"PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"Weight":2}`},
		{"DELETE", "/SlbNewCfgEnhRealServerTable/rs1", ""},
		{"POST", "?action=apply", ""},
		{"POST", "?action=save", ""},
		{"POST", "?action=revert", ""},
	} {
		st, m := c.json(req[0], req[1], req[2])
		g.Expect(st).To(Equal(406), "%v while applying", req)
		g.Expect(m).NotTo(HaveKey("testErr"), "apply-in-progress 406 is distinguishable from validation")
		g.Expect(m["application message"]).To(ContainSubstring("Apply is in progress"))
	}
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(1), "reads still work")
	g.Expect(c.scalar("agApplyConfig")).To(Equal("3"))
	d.ReleaseApply()
	g.Expect(c.waitState("agApplyConfig")).To(Equal("4"))
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"Weight":2}`)
}

func TestPendingConfigIsGlobal(t *testing.T) {
	g := NewWithT(t)
	_, c1 := startDevice(t, Options{})
	jar, _ := cookiejar.New(nil)
	c2 := newClient(t, c1.base)
	c2.hc.Jar = jar
	c1.ok("POST", "/SlbNewCfgEnhRealServerTable/from-1", `{"IpAddr":"10.0.0.1"}`)
	c2.ok("POST", "/SlbNewCfgEnhRealServerTable/from-2", `{"IpAddr":"10.0.0.2"}`)
	// The second session applies: both sessions' edits go live.
	g.Expect(c2.apply()).To(Equal("4"))
	g.Expect(c1.rows("/SlbCurCfgEnhRealServerTable")).To(HaveLen(2))
}

func TestAuthAndSession(t *testing.T) {
	g := NewWithT(t)
	_, c := startDevice(t, Options{User: "root", Password: "s3cret"})
	c.user, c.pass = "root", "wrong"
	st, m := c.json("GET", "/SlbNewCfgEnhRealServerTable", "")
	g.Expect(st).To(Equal(401))
	g.Expect(m["status"]).To(Equal("err"))
	c.user = ""
	st, _ = c.json("GET", "/SlbNewCfgEnhRealServerTable", "")
	g.Expect(st).To(Equal(401), "no credentials")

	jar, _ := cookiejar.New(nil)
	c.hc.Jar = jar
	c.user, c.pass = "root", "s3cret"
	c.rows("/SlbNewCfgEnhRealServerTable")
	c.user = "" // the session cookie alone authenticates
	g.Expect(c.rows("/SlbNewCfgEnhRealServerTable")).To(BeEmpty())
	c.ok("POST", "/logout", "")
	st, _ = c.json("GET", "/SlbNewCfgEnhRealServerTable", "")
	g.Expect(st).To(Equal(401), "logout ends the session")
}

func TestApplyTimeValidation(t *testing.T) {
	tests := []struct {
		name  string
		setup func(c *client)
		want  string
	}{
		{"group references a missing real server", func(c *client) {
			c.ok("POST", "/SlbNewCfgEnhGroupTable/g", `{}`)
			c.ok("PUT", "/SlbNewCfgEnhGroupTable/g", `{"AddServer":"ghost"}`)
		}, "Group g: real server ghost does not exist."},
		{"service references a missing group", func(c *client) {
			c.ok("POST", "/SlbNewCfgEnhVirtServerTable/v", `{"VirtServerIpAddress":"192.0.2.10","VirtServerState":2}`)
			c.ok("POST", "/SlbNewCfgEnhVirtServicesTable/v/1", `{"VirtPort":80}`)
			c.ok("PUT", "/SlbNewCfgEnhVirtServicesSeventhPartTable/v/1", `{"RealGroup":"nope"}`)
		}, "group nope does not exist"},
		{"duplicate VIP:port", func(c *client) {
			c.ok("POST", "/SlbNewCfgEnhGroupTable/g", `{}`)
			for _, v := range []string{"v1", "v2"} {
				c.ok("POST", "/SlbNewCfgEnhVirtServerTable/"+v, `{"VirtServerIpAddress":"192.0.2.10","VirtServerState":2}`)
				c.ok("POST", "/SlbNewCfgEnhVirtServicesTable/"+v+"/1", `{"VirtPort":80}`)
				c.ok("PUT", "/SlbNewCfgEnhVirtServicesSeventhPartTable/"+v+"/1", `{"RealGroup":"g"}`)
			}
		}, "duplicate virtual IP/port 192.0.2.10:80"},
		{"unknown health check", func(c *client) {
			c.ok("POST", "/SlbNewCfgEnhGroupTable/g", `{"HealthID":"weird"}`)
		}, "health check weird does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d, c := startDevice(t, Options{})
			tt.setup(c)
			g.Expect(c.apply()).To(Equal("5"), "agApplyConfig failed(5)")
			rows := c.rows("/AgApplyTable")
			g.Expect(rows).NotTo(BeEmpty())
			g.Expect(rows[0]).To(HaveKeyWithValue("Index", json.Number("1")))
			g.Expect(rows[0]["StringVal"]).To(ContainSubstring(tt.want))
			g.Expect(c.scalar("agApplyPending")).To(Equal("2"), "a failed apply leaves the edits pending")
			g.Expect(d.Snapshot(Running).Groups()).To(BeEmpty())
			c.ok("POST", "?action=revert", "")
			g.Expect(c.apply()).To(Equal("4"))
			g.Expect(c.rows("/AgApplyTable")).To(BeEmpty())
		})
	}
}

func TestApplySaveFaults(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{ApplyDuration: 20 * time.Millisecond})
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1"}`)

	d.InjectApply(ApplyFault{Fail: "Injected failure."})
	g.Expect(c.apply()).To(Equal("5"))
	g.Expect(c.rows("/AgApplyTable")[0]["StringVal"]).To(Equal("Injected failure."))

	// Early completion: complete(4) is reported while the running configuration is still old.
	d.InjectApply(ApplyFault{EarlyComplete: 300 * time.Millisecond})
	g.Expect(c.apply()).To(Equal("4"))
	g.Expect(c.scalar("agApplyPending")).To(Equal("2"), "still pending although reported complete")
	g.Eventually(func() string { return c.scalar("agApplyPending") }).WithTimeout(2 * time.Second).Should(Equal("3"))

	d.InjectSaveFailure("Flash write error.")
	c.ok("POST", "?action=save", "")
	g.Expect(c.waitState("agSaveConfig")).To(Equal("5"))
	g.Expect(c.rows("/AgSaveTable")[0]["StringVal"]).To(Equal("Flash write error."))
	g.Expect(c.scalar("agSavePending")).To(Equal("1"))
	c.ok("POST", "?action=save", "")
	g.Expect(c.waitState("agSaveConfig")).To(Equal("4"))
	g.Expect(c.rows("/AgSaveTable")).To(BeEmpty())
	g.Expect(d.Applies()).To(BeEquivalentTo(2))
	g.Expect(d.Saves()).To(BeEquivalentTo(2))
}

func TestHTTPFaults(t *testing.T) {
	d, c := startDevice(t, Options{})
	c.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1","Name":"web"}`)
	tests := []struct {
		name  string
		fault Fault
		check func(g Gomega, st int, body []byte, err error)
	}{
		{"spurious 401", Fault{Kind: FaultUnauthorized}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(st).To(Equal(401))
		}},
		{"5xx", Fault{Kind: FaultStatus, Status: 503}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(st).To(Equal(503))
			g.Expect(string(body)).To(ContainSubstring(`"status":"err"`))
		}},
		{"error with HTTP 200", Fault{Kind: FaultErrorOK, Message: "Internal failure"}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(st).To(Equal(200))
			g.Expect(string(body)).To(Equal(`{"message":"Internal failure","status":"err"}`))
		}},
		{"empty body with Content-Length", Fault{Kind: FaultEmptyBody}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(st).To(Equal(200))
			g.Expect(body).To(BeEmpty())
		}},
		{"malformed JSON", Fault{Kind: FaultMalformedJSON}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(json.Valid(body)).To(BeFalse())
			g.Expect(string(body)).To(ContainSubstring("\"web\n\u0085\""))
		}},
		{"numbers as strings", Fault{Kind: FaultNumbersAsStrings}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(string(body)).To(ContainSubstring(`"Weight":"1"`))
		}},
		{"connection reset", Fault{Kind: FaultReset}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(err).To(HaveOccurred())
		}},
		{"latency", Fault{Kind: FaultLatency, Delay: 150 * time.Millisecond}, func(g Gomega, st int, body []byte, err error) {
			g.Expect(st).To(Equal(200))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			f := tt.fault
			f.Method, f.Path, f.Times = "GET", "/config/SlbNewCfgEnhRealServerTable", 1
			id := d.AddFault(f)
			defer d.RemoveFault(id)
			req, _ := http.NewRequest("GET", c.base+"/config/SlbNewCfgEnhRealServerTable/rs1", nil)
			req.SetBasicAuth("admin", "admin")
			start := time.Now()
			// A fresh connection: the transport would silently retry a reset on a reused one.
			resp, err := (&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
			var st int
			var body []byte
			if err == nil {
				st = resp.StatusCode
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			tt.check(g, st, body, err)
			if f.Delay > 0 {
				g.Expect(time.Since(start)).To(BeNumerically(">=", f.Delay))
			}
			g.Expect(d.FaultFired(id)).To(Equal(1))
			// Times=1: the next request is served normally.
			g.Expect(c.rows("/SlbNewCfgEnhRealServerTable/rs1")).To(HaveLen(1))
		})
	}
}

func TestFaultMatchingSkipAndProbability(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{ApplyDuration: time.Millisecond})
	// A burst of three 401s after two good requests, on writes to one table only.
	id := d.AddFault(Fault{Method: "PUT", Path: "/config/SlbNewCfgEnhGroupTable", Kind: FaultUnauthorized, Skip: 2, Times: 3})
	var got []int
	for i := 0; i < 7; i++ {
		st, _ := c.do("PUT", "/SlbNewCfgEnhGroupTable/g", `{}`)
		got = append(got, st)
	}
	g.Expect(got).To(Equal([]int{200, 200, 401, 401, 401, 200, 200}))
	g.Expect(d.FaultFired(id)).To(Equal(3))
	st, _ := c.do("GET", "/SlbNewCfgEnhGroupTable", "")
	g.Expect(st).To(Equal(200), "other methods are not matched")

	d.ClearFaults()
	d.AddFault(Fault{Query: "action=apply", Kind: FaultStatus, Status: 500, Probability: 0.5})
	fails := 0
	for i := 0; i < 20; i++ {
		if st, _ := c.do("POST", "?action=revert", ""); st != 200 {
			t.Fatalf("revert matched an apply-only rule")
		}
		if st, _ := c.do("GET", "?prop=agApplyConfig", ""); st != 200 {
			t.Fatal("prop read matched")
		}
	}
	for i := 0; i < 200; i++ {
		st, _ := c.do("POST", "?action=apply", "")
		if st == 500 {
			fails++
		} else {
			c.waitState("agApplyConfig")
		}
	}
	g.Expect(fails).To(BeNumerically("~", 100, 30), "about half of the applies fail")

	// The AKO-style middleware sees every request and may answer by itself.
	d.ClearFaults()
	d.SetMiddleware(func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodDelete {
			writeJSON(w, http.StatusTeapot, map[string]any{"status": "err", "message": "no deletes today"})
			return
		}
		next.ServeHTTP(w, r)
	})
	st, _ = c.do("DELETE", "/SlbNewCfgEnhGroupTable/g", "")
	g.Expect(st).To(Equal(http.StatusTeapot))
	d.ResetMiddleware()
	c.ok("PUT", "/SlbNewCfgEnhGroupTable/g", `{}`)
	c.ok("DELETE", "/SlbNewCfgEnhGroupTable/g", "")
}

func TestRecording(t *testing.T) {
	g := NewWithT(t)
	d, c := startDevice(t, Options{Name: "unit-x"})
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1"}`)
	c.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs2", `{"IpAddr":"10.0.0.2"}`)
	c.apply()
	reqs := d.Requests()
	g.Expect(reqs[0]).To(gstruct.MatchFields(gstruct.IgnoreExtras, gstruct.Fields{
		"Device": Equal("unit-x"), "Method": Equal("PUT"), "Path": Equal("/config/SlbNewCfgEnhRealServerTable/rs1"),
		"Body": Equal(`{"IpAddr":"10.0.0.1"}`), "Status": Equal(200)}))
	counts := d.RequestCounts()
	g.Expect(counts).To(HaveKeyWithValue("PUT SlbNewCfgEnhRealServerTable", 2))
	g.Expect(counts).To(HaveKeyWithValue("POST ?action=apply", 1))
	d.ResetRecording()
	g.Expect(d.Requests()).To(BeEmpty())
}

func TestHARoles(t *testing.T) {
	g := NewWithT(t)
	p, a, b := startPair(t, Options{}, Options{})
	role := func(c *client) string {
		_, m := c.json("GET", "?prop=vrrpInfoHAState,haCurCfgMode", "")
		return fmt.Sprint(m["vrrpInfoHAState"])
	}
	g.Expect(role(a)).To(Equal("master"))
	g.Expect(role(b)).To(Equal("backup"))
	g.Expect(a.scalar("haCurCfgMode")).To(Equal("3"), "switch HA mode")

	// Forced failover through the MIB object, only on the master.
	st, _ := b.json("PUT", "/", `{"haOperSwitchBackup":2}`)
	g.Expect(st).To(Equal(406))
	a.ok("PUT", "/", `{"haOperSwitchBackup":"2"}`)
	g.Eventually(func() string { return role(b) }).Should(Equal("master"))
	g.Expect(role(a)).To(Equal("backup"))
	g.Expect(a.scalar("haOperSwitchBackup")).To(Equal("1"))

	p.Failover()
	g.Expect(p.Master()).To(BeIdenticalTo(p.A))
	p.SetRoles(RoleMaster, RoleMaster)
	g.Expect([]string{role(a), role(b)}).To(Equal([]string{"master", "master"}), "split brain")
	p.SetRoles(RoleBackup, RoleBackup)
	g.Expect(p.Master()).To(BeNil())
	p.Failover()
	g.Expect(p.Master()).To(BeIdenticalTo(p.A))
}

func TestBackupWriteModes(t *testing.T) {
	tests := []struct {
		mode       BackupWriteMode
		status     int
		backupRows int
	}{
		{BackupAccept, 200, 1},
		{BackupReject, 403, 0},
		{BackupIgnore, 200, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.mode), func(t *testing.T) {
			g := NewWithT(t)
			p, a, b := startPair(t, Options{}, Options{BackupWrites: tt.mode})
			st, m := b.json("PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1"}`)
			g.Expect(st).To(Equal(tt.status), "%v", m)
			st, _ = b.json("POST", "?action=apply", "")
			g.Expect(st).To(Equal(tt.status))
			g.Expect(b.rows("/SlbNewCfgEnhRealServerTable")).To(HaveLen(tt.backupRows))
			g.Expect(a.rows("/SlbNewCfgEnhRealServerTable")).To(BeEmpty(), "the master never sees backup writes")
			if tt.mode == BackupReject {
				g.Expect(m["application message"]).To(ContainSubstring("backup"))
			}
			// The master takes writes whatever the mode.
			a.ok("PUT", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1"}`)
			g.Expect(p.B.Applies()).To(BeNumerically("<=", 1))
		})
	}
}

func TestConfigSync(t *testing.T) {
	g := NewWithT(t)
	p, a, b := startPair(t, Options{}, Options{})
	a.ok("POST", "/SlbNewCfgEnhRealServerTable/rs1", `{"IpAddr":"10.0.0.1","State":2}`)
	g.Expect(a.apply()).To(Equal("4"))
	a.ok("POST", "?action=save", "")
	a.waitState("agSaveConfig")
	g.Expect(a.scalar("agSyncNeeded")).To(Equal("1"))
	g.Expect(b.rows("/SlbCurCfgEnhRealServerTable")).To(BeEmpty())

	a.ok("POST", "?action=sync", "")
	g.Eventually(func() string { return a.scalar("agSyncStatus") }).Should(Equal("2"))
	g.Expect(a.scalar("agSyncNeeded")).To(Equal("2"))
	g.Expect(b.rows("/SlbCurCfgEnhRealServerTable")).To(HaveLen(1))
	g.Expect(p.B.Snapshot(Flash).RealServers()).To(Equal([]string{"rs1"}))
	g.Expect(p.B.Snapshot(Running).Equal(p.A.Snapshot(Running))).To(BeTrue())
	g.Expect(b.rows("/SlbCurCfgPeerTable")[0]["IpAddr"]).To(Equal("192.0.2.1"), "the peer keeps its own peer table")
	info := a.rows("/AgLastSyncInfoTable")
	g.Expect(info).To(ConsistOf(map[string]any{"Index": json.Number("1"), "LastSyncPeerIp": "192.0.2.2", "LastSyncType": json.Number("2"), "LastSyncStatus": json.Number("2")}))

	// Injected failure, then a disabled peer: failure with a reason.
	p.A.InjectSyncFailure("peer timed out")
	a.ok("PUT", "/", `{"slbOperConfigSync":2}`)
	g.Eventually(func() string { return a.scalar("agSyncStatus") }).Should(Equal("3"))
	g.Expect(a.scalar("agLastSyncErrorReason")).To(ContainSubstring("peer timed out"))
	a.ok("PUT", "/SlbNewCfgPeerTable/1", `{"State":2}`)
	a.apply()
	a.ok("POST", "?action=sync", "")
	g.Eventually(func() string { return a.scalar("agLastSyncErrorReason") }).Should(ContainSubstring("no enabled peer"))
}

func TestConfigSyncNeedsIdenticalPasswords(t *testing.T) {
	g := NewWithT(t)
	_, a, _ := startPair(t, Options{}, Options{Password: "other"})
	a.ok("POST", "?action=sync", "")
	g.Eventually(func() string { return a.scalar("agSyncStatus") }).Should(Equal("3"))
	g.Expect(a.scalar("agLastSyncErrorReason")).To(ContainSubstring("passwords differ"))
}

func TestAutoSync(t *testing.T) {
	g := NewWithT(t)
	p, a, b := startPair(t, Options{AutoSync: true, AutoSyncDelay: 10 * time.Millisecond}, Options{})
	a.ok("POST", "/SlbNewCfgEnhGroupTable/g1", `{"Metric":2}`)
	g.Expect(a.apply()).To(Equal("4"))
	g.Eventually(func() []map[string]any { return b.rows("/SlbCurCfgEnhGroupTable") }).Should(HaveLen(1))
	g.Eventually(func() string { return a.scalar("agSyncStatus") }).Should(Equal("2"))
	g.Expect(a.rows("/AgLastSyncInfoTable")[0]["LastSyncType"]).To(Equal(json.Number("3")), "automatic")
	g.Expect(p.A.Syncs()).To(BeEquivalentTo(1))
}

func TestRoleFlipBetweenCallsAndFailoverMidApply(t *testing.T) {
	g := NewWithT(t)
	p, a, b := startPair(t, Options{}, Options{})
	// The role flips just before the third write of a batch.
	p.A.AddFault(Fault{Method: "PUT", Path: "/config/SlbNewCfgEnhRealServerTable", Kind: FaultHook, Skip: 2, Times: 1, Hook: p.Failover})
	for i := 1; i <= 3; i++ {
		a.ok("PUT", fmt.Sprintf("/SlbNewCfgEnhRealServerTable/rs%d", i), `{"IpAddr":"10.0.0.1"}`)
	}
	g.Expect(p.Master()).To(BeIdenticalTo(p.B))
	g.Expect(a.scalar("vrrpInfoHAState")).To(Equal("backup"), "the third write landed on a unit that is now backup")

	// Failover half-way through an apply on the (new) master B.
	p.B.InjectApply(ApplyFault{During: p.Failover})
	b.ok("PUT", "/SlbNewCfgEnhRealServerTable/x", `{"IpAddr":"10.0.0.9"}`)
	g.Expect(b.apply()).To(Equal("4"), "the apply completes on the unit, now backup")
	g.Expect(p.Master()).To(BeIdenticalTo(p.A))
	g.Expect(p.A.Snapshot(Running).RealServers()).To(BeEmpty(), "nothing reached the new master")
}
