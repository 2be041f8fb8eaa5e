# rlbd %postun ($1: 0 on erase, 1 on upgrade): make systemd forget the removed unit; on erase
# also drop the instances' enable links and the runtime directory.
if [ "$1" = 0 ]; then
	rm -f /etc/systemd/system/*.wants/rlbd@*.service
	rm -rf /run/rlbd
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
