package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// TestClusterProxyPodsMemberUnreachable: when Karmada's cluster proxy cannot reach a member (the
// read times out, or the proxy answers 5xx: no or a wrong API endpoint, as for a Pull member
// behind NAT), the other pods of that member are not read again until the failure expires, so a
// group with many pods there costs one timeout, not one per pod; a pod that is merely missing
// (404) in a member that answers does not stop the reads of its other pods.
func TestClusterProxyPodsMemberUnreachable(t *testing.T) {
	g := NewWithT(t)
	var mu sync.Mutex
	reads := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/") // /apis/cluster.karmada.io/v1alpha1/clusters/<c>/proxy/api/v1/namespaces/<ns>/pods/<name>
		cluster, name := parts[5], parts[len(parts)-1]
		mu.Lock()
		reads[cluster]++
		mu.Unlock()
		switch {
		case cluster == "silent":
			<-r.Context().Done() // never answers
		case cluster == "noendpoint":
			http.Error(w, `{"kind":"Status","message":"API endpoint of cluster noendpoint should not be empty","code":500}`, http.StatusInternalServerError)
		case name == "gone":
			http.Error(w, `{"kind":"Status","reason":"NotFound","code":404}`, http.StatusNotFound)
		default:
			_ = json.NewEncoder(w).Encode(&corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + types.UID(name)}})
		}
	}))
	defer srv.Close()
	f, err := NewClusterProxyPods(&rest.Config{Host: srv.URL}, time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	f.timeout = 200 * time.Millisecond

	for _, cluster := range []string{"silent", "noendpoint"} {
		for i := range 5 {
			_, err := f.MemberPod(context.Background(), cluster, "ns", fmt.Sprintf("web-%d", i))
			g.Expect(err).To(MatchError(ContainSubstring(cluster)), "pod %d of %s", i, cluster)
		}
	}
	// The member that answers: every pod is read, the missing one included.
	_, err = f.MemberPod(context.Background(), "near", "ns", "gone")
	g.Expect(err).To(MatchError(ContainSubstring("HTTP 404")))
	for _, name := range []string{"web-0", "web-1"} {
		p, err := f.MemberPod(context.Background(), "near", "ns", name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Name).To(Equal(name))
	}
	mu.Lock()
	defer mu.Unlock()
	g.Expect(reads).To(Equal(map[string]int{"silent": 1, "noendpoint": 1, "near": 3}), "one read per unreachable member, every read of the member that answers")
}
