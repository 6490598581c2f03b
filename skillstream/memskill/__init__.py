"""MemSkill: memory skills, their bank, the controller that selects them and the executors."""
