# rlbd %post ($1: 1 on install, 2 or more on upgrade): make the system user and group rlbd (from
# /usr/lib/sysusers.d/rlbd.conf), make systemd see the (new) unit, and on upgrade restart the
# running instances with the new binary. No instance is enabled here.
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers rlbd.conf || :
else
	getent group rlbd >/dev/null || groupadd --system rlbd || :
	getent passwd rlbd >/dev/null || useradd --system --gid rlbd --no-create-home \
		--home-dir /nonexistent --shell /usr/sbin/nologin \
		--comment "rlbd receive load-balancing daemon" rlbd || :
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
	if [ "$1" -ge 2 ] 2>/dev/null; then
		systemctl try-restart 'rlbd@*.service' >/dev/null 2>&1 || :
	fi
fi
