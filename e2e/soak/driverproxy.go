package soak

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"sync/atomic"

	"github.com/lbfed/lbfed/lbcf/driver"
)

// DriverMode is what the driver proxy does to the calls that change the front end.
type DriverMode int32

// Driver modes.
const (
	DriverPass  DriverMode = iota // forward to elb-driver
	DriverFails                   // answer Fail (retry after 1 s) without forwarding
	DriverHangs                   // answer nothing until the caller gives up (its webhook timeout)
)

// faultable are the webhooks whose Fail answer the caller retries: what programs the front end.
var faultable = map[string]bool{driver.CreateLoadBalancer: true, driver.EnsureLoadBalancer: true, driver.DeleteLoadBalancer: true,
	driver.GenerateBackendAddr: true, driver.EnsureBackend: true, driver.DeregisterBackend: true}

// DriverProxy stands in front of elb-driver, where the LoadBalancerDrivers of the soak point,
// so that the driver can be made to answer Fail or time out for a while (issue 46) while
// elb-driver itself stays as it is. It forwards with lbfed-controller's own client certificate.
type DriverProxy struct {
	mode  atomic.Int32
	proxy *httputil.ReverseProxy
}

// NewDriverProxy forwards to target with the client certificate certFile/keyFile, verifying the
// driver with caPEM.
func NewDriverProxy(target, certFile, keyFile string, caPEM []byte) (*DriverProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("driver proxy target: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("driver proxy client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p := &DriverProxy{proxy: httputil.NewSingleHostReverseProxy(u)}
	// A caller that gives up (its webhook timeout, during a slow device) is no news.
	p.proxy.ErrorLog = log.New(io.Discard, "", 0)
	p.proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return p, nil
}

// Set changes what the proxy does from the next call on.
func (p *DriverProxy) Set(m DriverMode) { p.mode.Store(int32(m)) }

func (p *DriverProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode := DriverMode(p.mode.Load())
	if mode == DriverPass || !faultable[path.Base(r.URL.Path)] {
		p.proxy.ServeHTTP(w, r)
		return
	}
	if mode == DriverHangs {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(driver.Fail("soak: the driver fails for a while", 1))
}
