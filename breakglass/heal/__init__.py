"""The heal model: what kube-apiserver and the cluster must write to come back."""
