# rlbd %preun ($1: 0 on erase, 1 on upgrade): stop every instance before the binary goes away.
if [ "$1" = 0 ] && [ -d /run/systemd/system ]; then
	systemctl stop 'rlbd@*.service' >/dev/null 2>&1 || :
fi
