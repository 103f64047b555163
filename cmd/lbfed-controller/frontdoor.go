package main

import (
	"flag"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lbfed/lbfed/frontdoor"
	"github.com/lbfed/lbfed/frontdoor/mcs"
	"github.com/lbfed/lbfed/frontdoor/service"
)

// frontDoorFlags configure the Karmada-native front doors (package frontdoor), which run in the
// federation's manager: they write LBCF objects that the federation programs.
type frontDoorFlags struct {
	mcs, service          bool
	driver                string
	serviceClass          string
	serviceClaimUnclassed bool
}

func (f *frontDoorFlags) addFlags(fs *flag.FlagSet) {
	fs.BoolVar(&f.mcs, "federation-mcs-load-balancer", true, "serve Karmada MultiClusterServices whose spec.types has LoadBalancer (VIP in annotation lb.zdns.cn/vip): one LoadBalancer and BackendGroup per port of the Service of the same name, placed on spec.providerClusters or where the Service is propagated")
	fs.BoolVar(&f.service, "federation-service-load-balancer", true, "serve Services type=LoadBalancer on Karmada of --federation-service-load-balancer-class (one VIP on the shared front end for every member); the VIP reaches the members in the annotation lbfed.io/load-balancer-ingress, where lbcf-controller --mode=member sets their status")
	fs.StringVar(&f.driver, "federation-frontdoor-driver", frontdoor.DefaultDriver, "LoadBalancerDriver of the LoadBalancers the front doors generate (an lbcf- name is looked up in kube-system, so front doors of every namespace share it): the Radware driver")
	fs.StringVar(&f.serviceClass, "federation-service-load-balancer-class", service.DefaultLoadBalancerClass, "spec.loadBalancerClass of the Services on Karmada that lbfed serves (not elb-controller's lb.zdns.cn/radware: an elb-controller in a member would program the propagated copy too)")
	fs.BoolVar(&f.serviceClaimUnclassed, "federation-service-claim-unclassed", false, "also serve Services on Karmada without a loadBalancerClass that carry lb.zdns.cn/vip, as elb-controller does in one cluster (give the members' lbcf-controller --service-claim-unclassed, and run no elb-controller claiming unclassed Services in the members)")
}

func (f *frontDoorFlags) setup(mgr ctrl.Manager, log logr.Logger) error {
	recorder := mgr.GetEventRecorder("lbfed-frontdoor")
	if f.mcs {
		if _, err := mcs.Setup(mgr, mcs.Options{Driver: f.driver, Recorder: recorder}); err != nil {
			return err
		}
	}
	if f.service {
		if _, err := service.Setup(mgr, service.Options{LoadBalancerClass: f.serviceClass, ClaimUnclassed: f.serviceClaimUnclassed, Driver: f.driver, Recorder: recorder}); err != nil {
			return err
		}
	}
	log.Info("front doors configured", "multiClusterService", f.mcs, "service", f.service, "driver", f.driver, "serviceClass", f.serviceClass)
	return nil
}
