// Package localup runs real Kubernetes and Karmada control planes as plain local processes — no
// Docker, no root — for lbfed's integration tests, end-to-end tests and `make up`.
//
// Everything listens on 127.0.0.1 on ports chosen at run time, so runs do not collide; every
// process logs to <run folder>/logs/<name>.log; processes are stopped in order (clients,
// aggregated apiserver, apiservers, etcd) and die with the process that started them even when
// it is killed, so nothing is left behind.
//
// The plain cluster for integration tests, the kubelet-like fake nodes, the Karmada topology,
// Pull-mode members and cutting a member off: docs/design/localup.md.
package localup
