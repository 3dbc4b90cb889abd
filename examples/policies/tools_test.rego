package acs_test

import rego.v1

import data.acs

test_viewer_may_echo if {
	acs.decision.decision == "allow" with input as dev_call("echo", {"text": "hi"}, ["viewer"])
}

test_viewer_may_not_read_the_environment if {
	d := acs.decision with input as dev_call("get-env", {}, ["viewer"])
	d.decision == "deny"
	d.reason_codes == ["tool_not_allowed"]
	d.policy_references[0].rule_id == "role-tool-allow-list"
}

test_developer_may_read_the_environment if {
	acs.decision.decision == "allow" with input as dev_call("get-env", {}, ["developer"])
}

test_admin_may_call_anything if {
	acs.decision.decision == "allow" with input as dev_call("anything-at-all", {}, ["admin"])
}

test_no_role_no_tools if {
	acs.decision.decision == "deny" with input as dev_call("echo", {}, [])
}

test_other_hooks_are_left_to_the_default if {
	not acs.decision with input as {"method": "steps/sessionStart", "params": {"metadata": {}, "payload": {}}}
}
