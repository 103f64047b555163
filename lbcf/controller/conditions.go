package controller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lbcfv1beta1 "github.com/lbfed/lbfed/lbcf/api/v1beta1"
)

// The LBCF kinds have their own condition types (no observedGeneration); these helpers set one
// and move lastTransitionTime only when the status changes, like meta.SetStatusCondition.

func setLBCondition(conds *[]lbcfv1beta1.LoadBalancerCondition, c lbcfv1beta1.LoadBalancerCondition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status == c.Status {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			(*conds)[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
}

func setDriverCondition(conds *[]lbcfv1beta1.LoadBalancerDriverCondition, c lbcfv1beta1.LoadBalancerDriverCondition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status == c.Status {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			(*conds)[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
}

func setRecordCondition(conds *[]lbcfv1beta1.BackendRecordCondition, c lbcfv1beta1.BackendRecordCondition) {
	for i := range *conds {
		if (*conds)[i].Type == c.Type {
			if (*conds)[i].Status == c.Status {
				c.LastTransitionTime = (*conds)[i].LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.Now()
			}
			(*conds)[i] = c
			return
		}
	}
	c.LastTransitionTime = metav1.Now()
	*conds = append(*conds, c)
}
