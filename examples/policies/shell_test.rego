package acs_test

import rego.v1

import data.acs

test_harmless_commands_run if {
	acs.decision.decision == "allow" with input as dev_call("run_command", {"command": "ls -la /workspace"}, ["developer"])
}

test_recursive_force_delete_is_denied if {
	some command in ["rm -rf /", "rm -fr ~", "sudo rm -r -f /var", "mkfs.ext4 /dev/sda1", "git push origin main --force"]
	d := acs.decision with input as dev_call("run_command", {"command": command}, ["admin"])
	d.decision == "deny"
	"destructive_command" in d.reason_codes
}

test_every_destructive_command_is_denied if {
	every command in ["rm -rf /", "rm -fr ~", "mkfs.ext4 /dev/sda1", "dd if=/dev/zero of=/dev/sda", "shutdown -h now"] {
		d := acs.decision with input as dev_call("run_command", {"command": command}, ["admin"])
		d.decision == "deny"
	}
}
