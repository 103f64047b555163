package controller

// WithBackendLabel is withBackendLabel, for the package's external tests.
var WithBackendLabel = withBackendLabel
