# rlbd %post ($1: 1 on install, 2 or more on upgrade): make systemd see the (new) unit, and on
# upgrade restart the running instances with the new binary. No instance is enabled here.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	if [ "$1" -ge 2 ] 2>/dev/null; then
		systemctl try-restart 'rlbd@*.service' >/dev/null 2>&1 || :
	fi
fi
