package federation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/lbfed/lbfed/lbcf/controller"
)

// ClusterProxyPods is a controller.MemberPodFetcher reading pods through Karmada's cluster proxy
// (/apis/cluster.karmada.io/v1alpha1/clusters/<cluster>/proxy/api/v1/namespaces/<ns>/pods/<name>)
// on the Karmada API server, with a short cache: a burst of records of one pod (one per port and
// load balancer) costs one read. A member the proxy cannot reach (the read fails or times out,
// or the proxy answers 5xx: a Pull-mode member with no or an unreachable API endpoint) is not
// read again for the cache's TTL: its other pods fail at once instead of each waiting for the
// timeout. The identity in the rest config needs the clusters/proxy subresource (verb get) of
// cluster.karmada.io.
type ClusterProxyPods struct {
	base   *url.URL
	client *http.Client
	ttl    time.Duration
	// timeout bounds one read: a member that cannot be reached must not hold a record worker.
	timeout time.Duration
	max     int

	mu    sync.Mutex
	cache map[string]cachedPod
	// down holds, per member, the failure that showed the proxy cannot reach it.
	down map[string]cachedPod
}

type cachedPod struct {
	pod *corev1.Pod
	err error
	at  time.Time
}

// NewClusterProxyPods returns a fetcher for the Karmada API server of cfg; ttl (10s when 0) is
// how long an answer (or a failure) is reused.
func NewClusterProxyPods(cfg *rest.Config, ttl time.Duration) (*ClusterProxyPods, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("karmada client: %w", err)
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(strings.TrimSuffix(host, "/") + cfg.APIPath)
	if err != nil {
		return nil, fmt.Errorf("karmada host %q: %w", cfg.Host, err)
	}
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	return &ClusterProxyPods{base: base, client: hc, ttl: ttl, timeout: 5 * time.Second, max: 10000, cache: map[string]cachedPod{}, down: map[string]cachedPod{}}, nil
}

var _ controller.MemberPodFetcher = &ClusterProxyPods{}

// MemberPod implements controller.MemberPodFetcher.
func (f *ClusterProxyPods) MemberPod(ctx context.Context, cluster, namespace, name string) (*corev1.Pod, error) {
	key := cluster + "/" + namespace + "/" + name
	now := time.Now()
	f.mu.Lock()
	if c, ok := f.cache[key]; ok && now.Sub(c.at) < f.ttl {
		f.mu.Unlock()
		return c.pod, c.err
	}
	if d, ok := f.down[cluster]; ok && now.Sub(d.at) < f.ttl {
		f.mu.Unlock()
		return nil, d.err
	}
	f.mu.Unlock()
	pod, err := f.get(ctx, cluster, namespace, name)
	f.mu.Lock()
	defer f.mu.Unlock()
	var unreachable *memberUnreachableError
	if errors.As(err, &unreachable) {
		f.down[cluster] = cachedPod{err: fmt.Errorf("%w (member %s not read again until %s)", err, cluster, now.Add(f.ttl).UTC().Format(time.RFC3339)), at: now}
	} else if err == nil {
		delete(f.down, cluster)
	}
	if len(f.cache) >= f.max {
		for k, c := range f.cache {
			if now.Sub(c.at) >= f.ttl {
				delete(f.cache, k)
			}
		}
		if len(f.cache) >= f.max {
			f.cache = map[string]cachedPod{}
		}
	}
	f.cache[key] = cachedPod{pod: pod, err: err, at: now}
	return pod, err
}

func (f *ClusterProxyPods) get(ctx context.Context, cluster, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	u := *f.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/apis/cluster.karmada.io/v1alpha1/clusters/" + url.PathEscape(cluster) +
		"/proxy/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	rsp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
			return nil, fmt.Errorf("get pod %s/%s of cluster %s: %w", namespace, name, cluster, err) // the caller gave up
		}
		return nil, &memberUnreachableError{fmt.Errorf("get pod %s/%s of cluster %s: %w", namespace, name, cluster, err)}
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(rsp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("read pod %s/%s of cluster %s: %w", namespace, name, cluster, err)
	}
	if rsp.StatusCode != http.StatusOK {
		err := fmt.Errorf("get pod %s/%s of cluster %s: HTTP %d: %.200s", namespace, name, cluster, rsp.StatusCode, body)
		if rsp.StatusCode >= 500 {
			// The proxy's own failure to reach the member (dial, TLS, no endpoint), not the pod's.
			return nil, &memberUnreachableError{err}
		}
		return nil, err
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(body, pod); err != nil {
		return nil, fmt.Errorf("decode pod %s/%s of cluster %s: %w", namespace, name, cluster, err)
	}
	if pod.Kind != "" && pod.Kind != "Pod" {
		return nil, fmt.Errorf("get pod %s/%s of cluster %s: got a %s", namespace, name, cluster, pod.Kind)
	}
	return pod, nil
}

// memberUnreachableError is a read that failed for the member as a whole, not for one pod.
type memberUnreachableError struct{ error }

func (e *memberUnreachableError) Unwrap() error { return e.error }
