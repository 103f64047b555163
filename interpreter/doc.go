// Package interpreter teaches Karmada the LBCF kinds (lbcf.tkestack.io/v1beta1 LoadBalancer and
// BackendGroup): a resource interpreter webhook (Handler, served by Server), the generated
// ResourceInterpreterWebhookConfiguration that registers it (WebhookConfiguration), and an
// equivalent Lua ResourceInterpreterCustomization for users who prefer no webhook
// (CustomizationsYAML). Both implementations are checked against one table of cases
// (testdata/cases), so they cannot drift.
//
// The semantics of each interpreter operation and the design choices: docs/design/interpreter.md.
package interpreter
