// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile). Kyverno's admission
// controller is upstream's github.com/kyverno/kyverno/cmd/kyverno, named by the .mod's `tool` directive, with
// upstream's own replace of k8s.io/pod-security-admission repeated (a dependency's replaces do not apply).
// Its CRDs (config/crds) and install manifest are read from the same module zip (breakglass/sandbox/engines.py).
module breakglass.invalid/kyverno

go 1.24
