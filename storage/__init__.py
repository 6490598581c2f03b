"""skillstream.storage"""
