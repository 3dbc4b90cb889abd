package acs_test

import rego.v1

import data.acs

destructive := {"destructiveHint": true}

test_developers_are_asked_before_destructive_tools if {
	d := acs.decision with input as call("write_file", {"path": "/workspace/a"}, ["developer"], "development", destructive)
	d.decision == "ask"
	d.reason_codes == ["destructive_tool"]
	d.ask_details.timeout_disposition == "deny"
	contains(d.ask_details.question, "write_file")
}

test_viewers_are_denied_destructive_tools if {
	d := acs.decision with input as call("read_file", {"path": "/workspace/a"}, ["viewer"], "development", destructive)
	d.decision == "deny"
	d.policy_references[0].rule_id == "no-destructive-tools-for-role"
}

test_admins_are_not_asked if {
	acs.decision.decision == "allow" with input as call("write_file", {"path": "/workspace/a"}, ["admin"], "development", destructive)
}
