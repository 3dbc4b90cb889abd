package acs_test

import rego.v1

import data.acs

test_paths_in_the_workspace_are_allowed if {
	acs.decision.decision == "allow" with input as dev_call("read_file", {"path": "/workspace/src/main.rs"}, ["viewer"])
}

test_paths_outside_are_denied if {
	d := acs.decision with input as dev_call("read_file", {"path": "/etc/shadow"}, ["viewer"])
	d.decision == "deny"
	d.reason_codes == ["path_not_allowed"]
}

test_climbing_out_is_denied if {
	acs.decision.decision == "deny" with input as dev_call("read_file", {"path": "/workspace/../etc/passwd"}, ["viewer"])
}

test_every_path_argument_is_checked if {
	acs.decision.decision == "deny" with input as dev_call(
		"move_file",
		{"source": "/workspace/a", "destination": "/root/a"},
		["admin"],
	)
}
