"""Admission configurations: their model, where they are read from (files, the API, etcd),
how kube-apiserver stores them (codec), and the deadlock-risk audit."""
