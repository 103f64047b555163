package v1beta1

import (
	"slices"

	"k8s.io/apimachinery/pkg/labels"
)

// SelectsPod reports whether the group selects the pod namespace/name with these labels: same
// namespace, by label (an empty selector selects nothing) minus except, or by name.
func (bg *BackendGroup) SelectsPod(namespace, name string, podLabels map[string]string) bool {
	pb := bg.Spec.Pods
	if pb == nil || bg.Namespace != namespace {
		return false
	}
	if pb.ByLabel != nil {
		return len(pb.ByLabel.Selector) > 0 && labels.SelectorFromSet(pb.ByLabel.Selector).Matches(labels.Set(podLabels)) &&
			!slices.Contains(pb.ByLabel.Except, name)
	}
	return name != "" && slices.Contains(pb.ByName, name)
}
