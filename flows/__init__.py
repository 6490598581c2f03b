"""skillstream.flows"""
