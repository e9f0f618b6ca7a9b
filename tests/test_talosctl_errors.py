"""What breakglass says when talosctl fails: the node's reason, not talosctl's progress lines."""

from breakglass.access.talos import _first_error

# talosctl patch prints its progress line before it returns the node's refusal (talosctl 1.x, stderr)
REFUSED = """patched MachineConfigs.config.talos.dev/v1alpha1 at the node 10.0.0.2
error applying new configuration: rpc error: code = InvalidArgument desc = 1 error occurred:
\t* kube-apiserver config is already set in v1alpha1 config

"""


def test_the_nodes_refusal_wins_over_the_progress_line():
    assert _first_error(REFUSED) == "kube-apiserver config is already set in v1alpha1 config"


def test_several_reasons_are_joined_and_a_plain_error_is_kept():
    two = REFUSED.replace("desc = 1 error occurred:", "desc = 2 errors occurred:") + "\t* second reason\n"
    assert _first_error(two) == "kube-apiserver config is already set in v1alpha1 config; second reason"
    assert _first_error("error: rpc error: code = Unavailable desc = connection refused") == "connection refused"
    assert _first_error("error constructing client: open /nope: no such file\n") == \
        "error constructing client: open /nope: no such file"
    assert _first_error("") == "no error message"
