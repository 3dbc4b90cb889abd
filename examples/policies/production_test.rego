package acs_test

import rego.v1

import data.acs

test_debug_tools_are_off_in_production if {
	d := acs.decision with input as call("get-env", {}, ["developer"], "production", {"readOnlyHint": true})
	d.decision == "deny"
	d.reason_codes == ["not_in_production"]
}

test_debug_tools_work_elsewhere if {
	acs.decision.decision == "allow" with input as call("get-env", {}, ["developer"], "staging", {"readOnlyHint": true})
}

test_writes_are_asked_in_production if {
	d := acs.decision with input as call("add", {"a": 1, "b": 2}, ["viewer"], "production", {"readOnlyHint": false})
	d.decision == "ask"
	d.reason_codes == ["production_write"]
}

test_admins_are_trusted_in_production if {
	acs.decision.decision == "allow" with input as call("add", {"a": 1, "b": 2}, ["admin"], "production", {"readOnlyHint": false})
}
