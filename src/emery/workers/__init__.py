"""Workers: where a job's rollouts run. The executors behind one protocol (local, the
``emery runner`` queue, Ray, or a plug-in) and the ``emery runner`` process."""
