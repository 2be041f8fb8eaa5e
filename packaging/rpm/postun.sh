# rlbd %postun ($1: 0 on erase, 1 on upgrade): make systemd forget the removed unit; on erase
# also drop the instances' enable links and the runtime directory (the metrics files a daemon
# that died left there, and the state files; one stopped cleanly removed its metrics file).
if [ "$1" = 0 ]; then
	rm -f /etc/systemd/system/*.wants/rlbd@*.service
	rm -rf /run/rlbd
	# Per-bond files the administrator wrote (/etc/rlbd/BOND.toml) are kept.
	rmdir /etc/rlbd 2>/dev/null || :
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
