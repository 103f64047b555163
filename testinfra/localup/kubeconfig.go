package localup

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// restConfig returns an admin client configuration for the apiserver at host. QPS and burst are
// raised well above client-go's 5/10: tests against a local apiserver should not be throttled
// on the client side.
func (p *PKI) restConfig(host string) *rest.Config {
	return &rest.Config{
		Host: host,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.CAPEM(),
			CertData: append([]byte(nil), p.adminCertPEM...),
			KeyData:  append([]byte(nil), p.adminKeyPEM...),
		},
		QPS:   200,
		Burst: 400,
	}
}

// writeKubeconfig writes an admin kubeconfig whose cluster, user and context are all called
// name (karmadactl join finds a member by --cluster-context=<name>), credentials embedded.
func (p *PKI) writeKubeconfig(path, name, host string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: p.CAPEM()}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificateData: append([]byte(nil), p.adminCertPEM...),
		ClientKeyData:         append([]byte(nil), p.adminKeyPEM...),
	}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
