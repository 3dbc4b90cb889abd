package acs_test

import rego.v1

import data.acs

test_ssn_is_redacted_in_place if {
	d := acs.decision with input as result("lookup-user", ["name: Ada, ssn: 123-45-6789"])
	d.decision == "modify"
	d.modifications.redactions == {{"path": "/outputs/0/value", "replacement": "name: Ada, ssn: [REDACTED]"}}
}

test_api_keys_are_redacted if {
	d := acs.decision with input as result("get-env", ["HOME=/root", "API_KEY=sk-demo-1234567890abcdef"])
	d.modifications.redactions == {{"path": "/outputs/1/value", "replacement": "API_KEY=[REDACTED]"}}
}

test_clean_output_is_left_alone if {
	not acs.decision with input as result("echo", ["hello"])
}
