// Marks the module root only: every build passes -modfile=v<X.Y.Z>.mod (go help modfile), so one main.go
// serves every kine version without a copy per version.
module breakglass.invalid/kine

go 1.23
